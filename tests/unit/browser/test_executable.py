"""Which Chromium the worker launches when none is configured and Playwright has no build of
its own: the headless shell before the full browser, whichever comes first on the PATH."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from service.browser.launch import find_executable
from service.errors import ConfigurationError
from service.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path


class _NoBundledBuild:
    """Playwright's browser type where `playwright install` never ran."""

    executable_path = "/nonexistent/ms-playwright/chromium/chrome"


def _on_path(directory: Path, *names: str) -> None:
    for name in names:
        program = directory / name
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)


def _find(settings: Settings) -> Path:
    return find_executable(settings, _NoBundledBuild())  # type: ignore[arg-type]


SETTINGS = Settings(worker_name="unit")


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_the_headless_shell_is_chosen_over_the_full_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: tuple[str, str]
) -> None:
    # Both on the PATH, in either order of directories: the shell renders a page for about
    # half the CPU (docs/decisions/headless-shell.md).
    directories = {name: tmp_path / name for name in order}
    for directory in directories.values():
        directory.mkdir()
    _on_path(directories["a"], "chromium")
    _on_path(directories["b"], "chromium-headless-shell")
    monkeypatch.setenv("PATH", ":".join(str(directories[name]) for name in order))
    assert _find(SETTINGS) == directories["b"] / "chromium-headless-shell"


def test_the_full_browser_serves_when_there_is_no_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_path(tmp_path, "chromium")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _find(SETTINGS) == tmp_path / "chromium"


def test_a_configured_executable_wins_and_a_missing_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_path(tmp_path, "chromium-headless-shell", "my-chrome")
    monkeypatch.setenv("PATH", str(tmp_path))
    chosen = SETTINGS.model_copy(update={"browser_executable": tmp_path / "my-chrome"})
    assert _find(chosen) == tmp_path / "my-chrome"
    missing = SETTINGS.model_copy(update={"browser_executable": tmp_path / "gone"})
    with pytest.raises(ConfigurationError, match=r"CRAWL_BROWSER_EXECUTABLE: .*gone"):
        _find(missing)


def test_no_browser_at_all_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="apt-get install chromium"):
        _find(SETTINGS)
