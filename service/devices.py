"""Playwright's device descriptors ("iPhone 15", "Pixel 7", ...), as the request's `device`
option names them.

`devices.json` is Playwright's own table (`playwright.devices`, less the browser each
descriptor was written for: this worker runs Chromium), saved so a request is judged at intake
without starting a browser; a unit test keeps it equal to the installed Playwright's.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Final, TypedDict

__all__ = ["Descriptor", "descriptor", "device_names", "suggestions"]

SUGGESTED: Final = ("iPhone 15", "Pixel 7", "iPad Pro 11", "Galaxy S9+", "Desktop Chrome")
"""Names an error message offers when a request names an unknown device."""


class _Size(TypedDict):
    width: int
    height: int


class Descriptor(TypedDict):
    """What a device sets on a browser context (Playwright's `new_context` arguments)."""

    user_agent: str
    viewport: _Size
    screen: _Size
    device_scale_factor: float
    is_mobile: bool
    has_touch: bool


@cache
def _table() -> dict[str, Descriptor]:
    text = resources.files("service").joinpath("devices.json").read_text(encoding="utf-8")
    table: dict[str, Descriptor] = json.loads(text)
    return table


def device_names() -> frozenset[str]:
    return frozenset(_table())


def descriptor(name: str) -> Descriptor:
    """The descriptor of the device `name` (a KeyError for a name not in the table)."""
    return _table()[name]


def suggestions() -> str:
    """A few valid names, for an error message."""
    return ", ".join(repr(name) for name in SUGGESTED if name in _table())
