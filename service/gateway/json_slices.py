"""A JSON document parsed a slice of tokens at a time, so that a 10 MiB body is read on the
event loop between other callers' steps (json's C parser, even in a thread, holds the
interpreter for the whole body: ~0.1-0.25 s). The result is `json.loads`'s, and what
`json.loads` refuses is a ValueError here too. `steps` is a pure generator that yields
between slices; `parse` runs each slice as one of the loop's heavy slices (`pacing`)."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Final

from service.gateway.pacing import SLICES

if TYPE_CHECKING:
    from collections.abc import Generator

SLICE_TOKENS: Final = 256
"""Values read per slice: about a millisecond of work for short ones (a long string is read
at once: ~1 ms a MiB)."""

RUN_ITEMS: Final = 64
"""Scalars of an array (URLs, numbers) that follow each other read at once by json's C
parser: the text the run matched is a valid array's content or json refuses it."""

MAX_DEPTH: Final = 512
"""Deepest nesting of arrays and objects read (deeper is refused: json.loads fails at the
interpreter's recursion limit, about twice this)."""

_SPACE: Final = re.compile(r"[ \t\n\r]*")
_RUN: Final = re.compile(
    r"(?:[ \t\n\r]*"
    r'(?:"[^"\\]*(?:\\.[^"\\]*)*"'
    r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null)"
    rf"[ \t\n\r]*,){{1,{RUN_ITEMS}}}"
)
"""Scalars each followed by a comma, in an array (never its last item)."""
_SCALAR: Final = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]
"""json's own scanner (C): reads one string, number or literal (and would read a whole
array or object: those are read here instead, a token at a time)."""


def text_of(raw: bytes) -> str:
    """The body's text as `json.loads` decodes bytes (UTF-8, -16 or -32 by its first bytes)."""
    return raw.decode(json.detect_encoding(raw), "surrogatepass")


async def parse(raw: bytes) -> Any:  # noqa: ANN401
    """`json.loads(raw)`, a slice at a time with the event loop free between slices."""
    parser = steps(text_of(raw))
    while True:
        ended, value = await SLICES.run(lambda: _step(parser))
        if ended:
            return value


def _step(parser: Generator[None, None, Any]) -> tuple[bool, Any]:
    """One slice: (False, None) while the parse goes on, (True, the value) at its end."""
    try:
        next(parser)
    except StopIteration as done:
        return True, done.value
    return False, None


class _Frame:
    """An array or object being read: its value and, in an object, the key being read."""

    __slots__ = ("key", "value")

    def __init__(self, value: list[Any] | dict[str, Any]) -> None:
        self.value = value
        self.key: str | None = None

    def add(self, item: Any) -> None:  # noqa: ANN401
        if isinstance(self.value, list):
            self.value.append(item)
        else:
            self.value[self.key or ""] = item


def steps(text: str) -> Generator[None, None, Any]:
    """Parse `text`, yielding every `SLICE_TOKENS` tokens; the value is the generator's return."""
    reader = _Reader(text)
    value = yield from reader.document()
    return value


class _Reader:
    __slots__ = ("at", "stack", "text", "tokens")

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.stack: list[_Frame] = []
        self.tokens = 0

    def document(self) -> Generator[None, None, Any]:
        if self.text.startswith("\ufeff"):
            raise ValueError("Unexpected UTF-8 BOM")
        self._space()
        value = yield from self._value()
        self._space()
        if self.at != len(self.text):
            raise ValueError(f"Extra data at {self.at}")
        return value

    def _value(self) -> Generator[None, None, Any]:
        """One value at `at`: a scalar at once, a container token by token."""
        result: Any = None
        done = False
        while not done:
            self.tokens += 1
            if self.tokens >= SLICE_TOKENS:
                self.tokens = 0
                yield
            if self.stack and isinstance(self.stack[-1].value, list):
                self._run(self.stack[-1].value)
            item, opened = self._item()
            while not opened:
                if not self.stack:
                    result, done = item, True
                    break
                frame = self.stack[-1]
                frame.add(item)
                closed = self._after_item(frame)
                if not closed:
                    break
                item = self.stack.pop().value
        return result

    def _item(self) -> tuple[Any, bool]:
        """A scalar at `at` (and False), or a container opened there (None, True); a
        container that is closed at once (`[]`, `{}`) counts as a scalar."""
        char = self.text[self.at : self.at + 1]
        if char not in {"[", "{"}:
            return self._scalar(), False
        self.at += 1
        frame = _Frame([] if char == "[" else {})
        self._space()
        if self.text[self.at : self.at + 1] == ("]" if char == "[" else "}"):
            self.at += 1
            return frame.value, False
        if len(self.stack) >= MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} at {self.at}")
        self.stack.append(frame)
        if char == "{":
            self._key(frame)
        return None, True

    def _after_item(self, frame: _Frame) -> bool:
        """After an item of `frame`: True when the frame closes, False when another item
        follows (its key read, for an object)."""
        self._space()
        char = self.text[self.at : self.at + 1]
        closing = "]" if isinstance(frame.value, list) else "}"
        self.at += 1
        if char == closing:
            return True
        if char != ",":
            raise ValueError(f"Expecting ',' delimiter at {self.at - 1}")
        self._space()
        if isinstance(frame.value, dict):
            self._key(frame)
        return False

    def _run(self, items: list[Any]) -> None:
        """Scalars that follow each other at `at`, each with its comma, read at once."""
        match = _RUN.match(self.text, self.at)
        if match is None:
            return
        run = json.loads(f"[{self.text[self.at : match.end() - 1]}]")
        items.extend(run)
        self.tokens += len(run)
        self.at = match.end()
        self._space()

    def _key(self, frame: _Frame) -> None:
        if self.text[self.at : self.at + 1] != '"':
            raise ValueError(f"Expecting property name enclosed in double quotes at {self.at}")
        frame.key, self.at = scanstring(self.text, self.at + 1)
        self._space()
        if self.text[self.at : self.at + 1] != ":":
            raise ValueError(f"Expecting ':' delimiter at {self.at}")
        self.at += 1
        self._space()

    def _scalar(self) -> Any:  # noqa: ANN401
        try:
            value, self.at = _SCALAR(self.text, self.at)
        except StopIteration as exc:
            raise ValueError(f"Expecting value at {exc.value}") from None
        return value

    def _space(self) -> None:
        match = _SPACE.match(self.text, self.at)
        self.at = match.end() if match else self.at
