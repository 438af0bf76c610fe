"""Where Playwright's driver keeps the code it compiled."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

from service.browser.launch import DRIVER_CACHE_ENV, keep_driver_compile_cache

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_the_cache_is_a_private_directory_in_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DRIVER_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    keep_driver_compile_cache()
    directory = tmp_path / "crawlstream" / "node-compile-cache"
    assert os.environ[DRIVER_CACHE_ENV] == str(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_cache_the_operator_set_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRIVER_CACHE_ENV, "/srv/node-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    keep_driver_compile_cache()
    assert os.environ[DRIVER_CACHE_ENV] == "/srv/node-cache"
    assert not (tmp_path / "crawlstream").exists()


def test_no_cache_where_none_can_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.delenv(DRIVER_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    keep_driver_compile_cache()
    assert DRIVER_CACHE_ENV not in os.environ
