"""A module that fails while importing (the CLI must say so in one line)."""

from __future__ import annotations

raise RuntimeError("this module is broken on purpose")
