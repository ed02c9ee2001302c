// chongming-task dashboard: live updates over Server-Sent Events, plus small conveniences.
// No inline script anywhere (the Content-Security-Policy forbids it): this file is all of it.
(function () {
  "use strict";

  // A refresh must never wipe what the operator is typing or has selected.
  function busy(region) {
    var active = document.activeElement;
    if (active && region.contains(active) && (active.tagName === "INPUT" || active.tagName === "TEXTAREA" || active.tagName === "SELECT")) {
      return true;
    }
    var inputs = region.querySelectorAll("input");
    for (var i = 0; i < inputs.length; i++) {
      var input = inputs[i];
      if (input.type === "checkbox" && input.checked) return true;
      if ((input.type === "text" || !input.getAttribute("type")) && input.name === "reason" && input.value) return true;
    }
    return false;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt && elt.id === "live" && busy(elt)) event.preventDefault();
  });

  // A refresh requested before the operator started typing can answer after: its
  // swap would put back an empty form. Drop it; the next change or tick refreshes.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt && elt.id === "live" && busy(elt)) event.detail.shouldSwap = false;
  });

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.id === "select-all") {
      var boxes = document.querySelectorAll('input[name="ids"]');
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = target.checked;
    }
  });

  function connect() {
    var meta = document.querySelector('meta[name="chongming-events"]');
    var state = document.getElementById("live-state");
    if (!meta || !window.EventSource) return;
    var source = new EventSource(meta.getAttribute("content"));
    function fire(name) {
      document.body.dispatchEvent(new CustomEvent(name, { bubbles: true }));
    }
    source.addEventListener("hello", function () {
      if (state) state.className = "live-state on";
      document.body.setAttribute("data-live", "on");
    });
    source.addEventListener("change", function () { fire("dashboard-change"); });
    source.addEventListener("tick", function () { fire("dashboard-tick"); });
    source.onerror = function () {
      if (state) state.className = "live-state off";
      document.body.setAttribute("data-live", "off");
    };
  }

  // A filter-wide bulk action runs one page per request: go on to the next by itself.
  function continueBulk() {
    var form = document.querySelector("form[data-continue]");
    if (form) form.submit();
  }

  function start() {
    connect();
    continueBulk();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
