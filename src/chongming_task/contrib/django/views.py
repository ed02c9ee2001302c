"""The dashboard as a Django view, for staff users (``urls.py`` mounts it).

The request is checked by Django: an active staff user (``is_staff``) gets the
dashboard, with every action recorded under the user's username; anyone else is sent
to the login page (the admin's when ``django.contrib.admin`` is installed and routed,
else ``settings.LOGIN_URL``), and a request of the JSON API or the event stream gets
401 (not signed in) or 403 (not staff) as JSON. The dashboard's own forms carry a
CSRF token of its own, derived from the Django session, so the view is exempt from
Django's CSRF check (the dashboard refuses a state change without its token).
"""

from __future__ import annotations

import threading
from typing import Final

from django.apps import apps
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.urls import NoReverseMatch, reverse
from django.utils.crypto import salted_hmac
from django.views.decorators.csrf import csrf_exempt

from chongming_task.contrib.django._bridge import Bridge
from chongming_task.contrib.django._config import load_config
from chongming_task.contrib.django._project import get_client, on_reset
from chongming_task.web import Identity

__all__ = ["dashboard"]

_CSRF_SALT: Final = "chongming_task.contrib.django.dashboard.csrf"


class _Dashboard:
    """The dashboard's app of this process (made on first use, dropped with the client)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bridge: Bridge | None = None

    def get(self) -> Bridge:
        client = get_client()
        with self.lock:
            if self.bridge is None:
                from chongming_task.web import create_app

                app = create_app(client.store, read_only=load_config().dashboard_read_only)
                self.bridge = Bridge(app)
                on_reset(self.forget)
            return self.bridge

    def forget(self) -> None:
        with self.lock:
            bridge, self.bridge = self.bridge, None
        if bridge is not None:
            bridge.close()


_dashboard = _Dashboard()


def _login_url() -> str:
    if apps.is_installed("django.contrib.admin"):
        try:
            return reverse("admin:login")
        except NoReverseMatch:
            pass
    return str(settings.LOGIN_URL)


def _csrf(request: HttpRequest) -> str | None:
    """The dashboard's CSRF token for this Django session (``None``: no session, so
    every state change is refused)."""
    session = getattr(request, "session", None)
    key = getattr(session, "session_key", None)
    return salted_hmac(_CSRF_SALT, key, algorithm="sha256").hexdigest() if key else None


@csrf_exempt
def dashboard(request: HttpRequest, path: str = "") -> HttpResponseBase:
    """The dashboard's page, API call or asset ``path``, for an active staff user."""
    user = getattr(request, "user", None)
    if user is None:
        raise ImproperlyConfigured(
            "the chongming-task dashboard needs django.contrib.auth's "
            "AuthenticationMiddleware (request.user) in settings.MIDDLEWARE"
        )
    if not (user.is_active and getattr(user, "is_staff", False)):
        if path.startswith("api/") or path == "events":
            signed_in = user.is_authenticated
            message = "staff only: sign in as a staff user" if signed_in else "sign in first"
            return JsonResponse({"error": message}, status=403 if signed_in else 401)
        return redirect_to_login(request.get_full_path(), _login_url())
    identity = Identity(user=user.get_username(), via="host", csrf=_csrf(request))
    return _dashboard.get().respond(request, path, identity)
