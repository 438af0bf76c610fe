"""Page actions (`CrawlOptions.actions`): steps run in order on a loaded page before its
content is read, shaped like Firecrawl's. Part of the wire contract (`contracts/`)."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, model_validator

from service.selectors import MAX_SELECTOR_CHARS

MAX_ACTIONS: Final = 50
"""Steps per request."""

MAX_WAIT_MS: Final = 60_000
"""Longest `wait` for a fixed time (the page's deadline bounds it further)."""

MAX_SCROLL_STEPS: Final = 200
"""Most scrolls of one `scroll` with `until_idle`."""

Selector = Annotated[str, StringConstraints(min_length=1, max_length=MAX_SELECTOR_CHARS)]
"""A Playwright selector (CSS, or an engine such as `text=`), judged by the browser."""


class _Step(BaseModel):
    """A step; its `type` has no default, so a wire form without defaults (`dump_request`)
    still names every step's type (the union is told apart by it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class WaitAction(_Step):
    """Wait a fixed time, or until an element matching `selector` is visible."""

    type: Literal["wait"]
    milliseconds: int | None = Field(default=None, ge=0, le=MAX_WAIT_MS)
    selector: Selector | None = None

    @model_validator(mode="after")
    def _one(self) -> WaitAction:
        if (self.milliseconds is None) == (self.selector is None):
            raise ValueError("wait: give exactly one of `milliseconds` and `selector`")
        return self


class ClickAction(_Step):
    """Click the first element `selector` matches (every one with `all`), waiting for it."""

    type: Literal["click"]
    selector: Selector
    all: bool = False


class WriteAction(_Step):
    """Fill the field `selector` matches with `text`; without `selector`, type it into the
    element that has the focus."""

    type: Literal["write"]
    text: Annotated[str, StringConstraints(max_length=10_000)]
    selector: Selector | None = None


class PressAction(_Step):
    """Press a key in the focused element (Playwright key names: `Enter`, `Tab`, `Control+A`)."""

    type: Literal["press"]
    key: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class ScrollAction(_Step):
    """Scroll the page by `amount` pixels (default: one window height) `direction`; or, with
    `until_idle`, to the bottom again and again until the page has not grown for 1 s after a
    scroll, `max_steps` scrolls were made or the step's deadline passed (infinite scroll)."""

    type: Literal["scroll"]
    direction: Literal["up", "down"] = "down"
    amount: int | None = Field(default=None, ge=1, le=1_000_000)
    until_idle: bool = False
    max_steps: int = Field(default=20, ge=1, le=MAX_SCROLL_STEPS)


class ExecuteJavascriptAction(_Step):
    """Evaluate `script` in the page (as Playwright's `page.evaluate`: an expression, or a
    function that is called; a promise is awaited); its JSON value goes to `returns`."""

    type: Literal["execute_javascript"]
    script: Annotated[str, StringConstraints(min_length=1, max_length=100_000)]


class ScreenshotAction(_Step):
    """A PNG of the viewport (or the whole page with `full_page`) into `screenshots`."""

    type: Literal["screenshot"]
    full_page: bool = False


Action = Annotated[
    WaitAction
    | ClickAction
    | WriteAction
    | PressAction
    | ScrollAction
    | ExecuteJavascriptAction
    | ScreenshotAction,
    Field(discriminator="type"),
]

Actions = Annotated[tuple[Action, ...], Field(max_length=MAX_ACTIONS)]


class ActionsOutput(BaseModel):
    """What a page's actions gave, in step order."""

    model_config = ConfigDict(frozen=True)

    screenshots: list[str] = Field(default_factory=list)
    """PNG, base64: one per `screenshot` step."""
    returns: list[JsonValue] = Field(default_factory=list)
    """One per `execute_javascript` step: the script's value as JSON (`null` for undefined)."""


__all__ = ["MAX_ACTIONS", "Action", "Actions", "ActionsOutput"]
