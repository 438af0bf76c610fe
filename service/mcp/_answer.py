"""A tool's answer: the text a model reads and its structured copy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    text: str
    structured: dict[str, Any]
