"""Run a request's page actions in order on a loaded page (`CrawlOptions.actions`).

Each step runs on the page as it is then (after any navigation an earlier step caused: a
click or a key that submits a form waits for the next document to load) and has a deadline:
what is left of the time the page gives its actions. A step that fails ends the page with
`action_failed`, naming the step (1-based) and why.
"""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING, Final

from playwright.async_api import Error as PlaywrightError
from pydantic import JsonValue, TypeAdapter, ValidationError

from service.browser.failures import PageFailedError, first_line
from service.contracts import ErrorCode
from service.contracts_actions import (
    ActionsOutput,
    ClickAction,
    ExecuteJavascriptAction,
    PressAction,
    ScreenshotAction,
    ScrollAction,
    WaitAction,
    WriteAction,
)

if TYPE_CHECKING:
    from playwright.async_api import Page

    from service.browser.deadline import StepDeadline
    from service.contracts_actions import Action

IDLE_MS: Final = 1000
"""An infinite scroll is over when the page has not grown for this long after a scroll."""

IDLE_TICK_MS: Final = 50
"""The page's own timer ticks that measure `IDLE_MS`: the wait runs in the page and lasts at
least `IDLE_MS // IDLE_TICK_MS` turns of the page's timers as well as `IDLE_MS`, so a page
whose main thread was busy (or whose renderer got no CPU) still runs the timers that were due
before the wait gives up, as it would on an idle machine."""

OWN_TIMEOUT_MARGIN_S: Final = 0.5
"""Extra time past a step's deadline before it is cut: Playwright's own timeout, which says
what it waited for, comes first."""

NAVIGATION_RETRIES: Final = 3
"""Times a reading step runs again after a navigation interrupted it."""

_NAVIGATED: Final = ("Execution context was destroyed", "is navigating", "navigation")
"""Playwright's words for a call that a navigation of the page interrupted."""

_REPEATABLE: Final = (WaitAction, ScrollAction, ExecuteJavascriptAction, ScreenshotAction)
"""Steps that change nothing a user did (a script may, but runs on the new document)."""

_JSON: Final = TypeAdapter(JsonValue)

_SCROLL_AND_WAIT: Final = """async ([idleMs, tickMs]) => {
  const root = document.documentElement;
  const before = root.scrollHeight;
  window.scrollTo(0, before);
  const start = performance.now();
  for (let ticks = 0; ticks * tickMs < idleMs || performance.now() - start < idleMs; ticks++) {
    await new Promise((resolve) => setTimeout(resolve, tickMs));
    if (root.scrollHeight > before) return true;
  }
  return false;
}"""
_BY: Final = "([dy, sign]) => window.scrollBy(0, (dy ?? window.innerHeight) * sign)"


class _Outputs:
    def __init__(self) -> None:
        self.screenshots: list[str] = []
        self.returns: list[JsonValue] = []


async def run_actions(
    page: Page, actions: tuple[Action, ...], deadline: StepDeadline
) -> ActionsOutput:
    """Run `actions` in order; raises `PageFailedError(ACTION_FAILED)` at the first failure."""
    outputs = _Outputs()
    for number, action in enumerate(actions, start=1):
        left_s = deadline.left_s()
        try:
            async with asyncio.timeout(left_s + OWN_TIMEOUT_MARGIN_S):
                await _run_once_landed(page, action, outputs, deadline)
        except TimeoutError:
            raise _failed(number, action, f"did not finish within {left_s:.1f} s") from None
        except PlaywrightError as exc:
            if page.is_closed():
                raise
            raise _failed(number, action, first_line(exc)) from exc
    return ActionsOutput(screenshots=outputs.screenshots, returns=outputs.returns)


async def _run_once_landed(
    page: Page, action: Action, outputs: _Outputs, deadline: StepDeadline
) -> None:
    """Run `action` on the document the page is at once it has loaded; a step that only
    reads or waits, interrupted by a navigation an earlier step started (a submitted form
    whose answer came late), runs again on the next document."""
    for attempt in range(NAVIGATION_RETRIES + 1):
        await page.wait_for_load_state("load", timeout=deadline.remaining_ms())
        try:
            await _run(page, action, outputs, deadline.left_s() * 1000)
        except PlaywrightError as exc:
            navigated = any(words in str(exc) for words in _NAVIGATED)
            if (
                not navigated
                or not isinstance(action, _REPEATABLE)
                or attempt == NAVIGATION_RETRIES
            ):
                raise
            continue
        return


def _failed(number: int, action: Action, why: str) -> PageFailedError:
    selector = getattr(action, "selector", None)
    step = action.type if selector is None else f"{action.type} {selector!r}"
    return PageFailedError(ErrorCode.ACTION_FAILED, f"action {number} ({step}): {why}")


async def _run(page: Page, action: Action, outputs: _Outputs, timeout_ms: float) -> None:
    match action:
        case WaitAction(milliseconds=int(ms)):
            await page.wait_for_timeout(ms)
        case WaitAction(selector=str(selector)):
            await page.wait_for_selector(selector, state="visible", timeout=timeout_ms)
        case ClickAction():
            await _click(page, action, timeout_ms)
        case WriteAction(selector=str(selector)):
            await page.locator(selector).first.fill(action.text, timeout=timeout_ms)
        case WriteAction():
            await page.keyboard.type(action.text)
        case PressAction():
            await page.keyboard.press(action.key)
        case ScrollAction(until_idle=True):
            await _scroll_until_idle(page, action.max_steps)
        case ScrollAction():
            await page.evaluate(_BY, [action.amount, -1 if action.direction == "up" else 1])
        case ExecuteJavascriptAction() | ScreenshotAction():
            await _gather(page, action, outputs, timeout_ms)


async def _gather(
    page: Page,
    action: ExecuteJavascriptAction | ScreenshotAction,
    outputs: _Outputs,
    timeout_ms: float,
) -> None:
    """The steps whose output goes on the result."""
    if isinstance(action, ExecuteJavascriptAction):
        outputs.returns.append(_as_json(await page.evaluate(action.script)))
    else:
        shot = await page.screenshot(full_page=action.full_page, type="png", timeout=timeout_ms)
        outputs.screenshots.append(base64.b64encode(shot).decode())


async def _click(page: Page, action: ClickAction, timeout_ms: float) -> None:
    matches = page.locator(action.selector)
    if not action.all:
        await matches.first.click(timeout=timeout_ms)
        return
    await matches.first.wait_for(state="attached", timeout=timeout_ms)
    for element in await matches.all():
        await element.click(timeout=timeout_ms)


async def _scroll_until_idle(page: Page, max_steps: int) -> None:
    """Scroll to the bottom until the page stops growing (the step's deadline caps it)."""
    for _ in range(max_steps):
        if not await page.evaluate(_SCROLL_AND_WAIT, [IDLE_MS, IDLE_TICK_MS]):
            return


def _as_json(value: object) -> JsonValue:
    """The script's value as JSON; what JSON cannot hold (a Date, an infinity) as its text."""
    try:
        return _JSON.validate_python(value)
    except ValidationError:
        return str(value)
