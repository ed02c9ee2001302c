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
  // A swap that goes ahead keeps keyboard focus: the focused control (Stop, a link)
  // is found again in the new region, else focus goes to the page's content, never
  // to the body (where the next Tab would start over at the header).
  var refocus = null;

  function focusKey(el) {
    return {
      id: el.id,
      tag: el.tagName,
      name: el.getAttribute("name"),
      value: el.getAttribute("value"),
      target: el.getAttribute("formaction") || el.getAttribute("href") || el.getAttribute("action"),
      text: (el.textContent || "").trim()
    };
  }

  function findKey(region, key) {
    if (key.id) {
      var byId = document.getElementById(key.id);
      if (byId && region.contains(byId)) return byId;
    }
    var candidates = region.getElementsByTagName(key.tag);
    for (var i = 0; i < candidates.length; i++) {
      var c = candidates[i];
      if (c.getAttribute("name") === key.name && c.getAttribute("value") === key.value &&
          (c.getAttribute("formaction") || c.getAttribute("href") || c.getAttribute("action")) === key.target &&
          (c.textContent || "").trim() === key.text) return c;
    }
    return null;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!elt || elt.id !== "live") return;
    if (busy(elt)) {
      event.detail.shouldSwap = false;
      return;
    }
    var active = document.activeElement;
    refocus = active && active !== elt && elt.contains(active) ? focusKey(active) : null;
  });

  function restoreFocus() {
    var live = document.getElementById("live");
    if (!refocus || !live) return;
    var key = refocus;
    refocus = null;
    if (live.contains(document.activeElement)) return;
    var found = findKey(live, key) || document.getElementById("content");
    if (found) found.focus({ preventScroll: true });
  }
  document.addEventListener("htmx:afterSwap", restoreFocus);
  document.addEventListener("htmx:afterSettle", restoreFocus);

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.id === "select-all") {
      var boxes = document.querySelectorAll('input[name="ids"]');
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = target.checked;
    }
  });

  // A table wider than the screen scrolls by itself (style.css); one with nothing to
  // focus inside takes the keyboard itself, named after its section's heading.
  function scrollable() {
    var tables = document.querySelectorAll("main table");
    for (var i = 0; i < tables.length; i++) {
      var table = tables[i];
      var wide = table.scrollWidth > table.clientWidth + 1;
      var focusable = table.querySelector("a[href], button, input, select, textarea, [tabindex]");
      if (wide && !focusable) {
        table.setAttribute("tabindex", "0");
        var heading = table.closest("section") && table.closest("section").querySelector("h2");
        if (heading && !table.getAttribute("aria-label")) table.setAttribute("aria-label", heading.textContent.trim());
      } else if (!wide && table.getAttribute("tabindex") === "0") {
        table.removeAttribute("tabindex");
      }
    }
  }
  document.addEventListener("htmx:afterSettle", scrollable);
  window.addEventListener("resize", scrollable);

  function connect() {
    var meta = document.querySelector('meta[name="chongming-events"]');
    var state = document.getElementById("live-state");
    if (!meta || !window.EventSource) return;
    var source = new EventSource(meta.getAttribute("content"));
    function fire(name) {
      document.body.dispatchEvent(new CustomEvent(name, { bubbles: true }));
    }
    // Told by text as well as by the dot's colour.
    function show(on) {
      if (!state) return;
      state.className = "live-state " + (on ? "on" : "off");
      state.textContent = on ? "live: on" : "live: off, reconnecting";
    }
    source.addEventListener("hello", function () {
      show(true);
      document.body.setAttribute("data-live", "on");
    });
    source.addEventListener("change", function () { fire("dashboard-change"); });
    source.addEventListener("tick", function () { fire("dashboard-tick"); });
    source.onerror = function () {
      show(false);
      document.body.setAttribute("data-live", "off");
    };
  }

  // A filter-wide bulk action runs one page per request: go on to the next by itself.
  function continueBulk() {
    var form = document.querySelector("form[data-continue]");
    if (form) form.submit();
  }

  function start() {
    scrollable();
    connect();
    continueBulk();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
