"""docs/settings.md is what `crawlstream settings` makes from the settings' docstrings now."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli.main import main
from service.settings import Settings, env_name
from service.settings_doc import SETTINGS_PAGE, settings_page

REPO = Path(__file__).resolve().parents[2]


def test_the_checked_in_settings_page_is_what_the_code_generates():
    """Fails when a setting, its default or its docstring changed and the page was not
    regenerated (`crawlstream settings --out docs/settings.md`)."""
    assert (REPO / SETTINGS_PAGE).read_text(encoding="utf-8") == settings_page()


def test_the_page_has_one_row_per_setting():
    rows = [line for line in settings_page().splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [env_name(n) for n in Settings.model_fields]


def _run(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as ended:
        main(argv)
    return int(ended.value.code or 0)


def test_the_command_writes_the_page_and_its_check_tells_a_stale_one(tmp_path: Path):
    page = tmp_path / "settings.md"
    assert _run(["settings", "--check", "--out", str(page)]) == 1  # missing
    assert _run(["settings", "--out", str(page)]) == 0
    assert page.read_text(encoding="utf-8") == settings_page()
    assert _run(["settings", "--check", "--out", str(page)]) == 0
    page.write_text(settings_page().replace("| `CRAWL_ROLE` | `all` |", "| `CRAWL_ROLE` | `x` |"))
    assert _run(["settings", "--check", "--out", str(page)]) == 1


def test_the_command_prints_the_page(capsys: pytest.CaptureFixture[str]):
    assert _run(["settings"]) == 0
    assert capsys.readouterr().out == settings_page()
