"""A module without any task definition (the CLI must refuse it clearly)."""

from __future__ import annotations

VALUE = 1
