"""The dashboard's URLs: ``path("tasks/", include("chongming_task.contrib.django.urls"))``.

Every path under the prefix goes to :func:`~chongming_task.contrib.django.views.dashboard`
(pages, the JSON API, the event stream, the static files); the page at the prefix
itself is named ``chongming_task:dashboard`` (``reverse("chongming_task:dashboard")``).
"""

from __future__ import annotations

from django.urls import path, re_path

from chongming_task.contrib.django.views import dashboard

app_name = "chongming_task"

urlpatterns = [
    path("", dashboard, name="dashboard"),
    re_path(r"^(?P<path>.+)$", dashboard, name="dashboard-path"),
]
