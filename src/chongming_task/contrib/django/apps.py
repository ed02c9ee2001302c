"""The app config: ``INSTALLED_APPS = [..., "chongming_task.contrib.django"]``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed

__all__ = ["ChongmingTaskConfig"]

#: Settings whose change (``override_settings`` in a test) drops the project's client.
_RESETTING = frozenset({"CHONGMING_TASK", "DATABASES", "INSTALLED_APPS"})


def _setting_changed(*, setting: str, **_: Any) -> None:
    if setting in _RESETTING:
        from chongming_task.contrib.django._project import reset

        reset()


class ChongmingTaskConfig(AppConfig):
    """Registers the system check and follows setting changes; opens nothing.

    The store, the task modules and the client are made on first use
    (``get_client()``, a management command, the dashboard), never here: a
    management command that never enqueues never connects.
    """

    name = "chongming_task.contrib.django"
    label = "chongming_task"
    verbose_name = "chongming-task"

    def ready(self) -> None:
        from chongming_task.contrib.django._checks import check_settings

        checks.register(check_settings, "chongming_task")
        setting_changed.connect(_setting_changed, dispatch_uid="chongming_task.settings")
