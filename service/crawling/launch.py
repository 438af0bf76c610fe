"""How Chromium is found and launched: flags that work headless, as root, on a closed network."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Final

from service.errors import ConfigurationError

if TYPE_CHECKING:
    from playwright.async_api import BrowserType

    from service.settings import Settings

PLAYWRIGHT_DISABLED_FEATURES: Final = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
)
"""Playwright's own `--disable-features` list: a user-supplied one replaces it, so repeat it."""

OMNIBOX_POPUP_FEATURES: Final = (
    "WebUIOmniboxPopup",
    "WebUIOmniboxAimPopup",
    "WebUIOmniboxFullPopup",
    "PreloadTopChromeWebUI",
)
"""Debian's Chromium opens an address-bar popup renderer per context unless these are off;
disabling them makes a context about 2.5x cheaper."""

CHROMIUM_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + OMNIBOX_POPUP_FEATURES),
)
"""Flags for every launch: headless as root, and no traffic of Chromium's own."""

SYSTEM_CHROMIUM_NAMES: Final = ("chromium", "chromium-browser", "google-chrome")


def find_executable(settings: Settings, browser_type: BrowserType) -> Path:
    """The configured executable, else Playwright's own build, else a system Chromium."""
    if settings.browser_executable is not None:
        if not settings.browser_executable.exists():
            raise ConfigurationError(
                f"CRAWL_BROWSER_EXECUTABLE: {settings.browser_executable} does not exist"
            )
        return settings.browser_executable
    bundled = Path(browser_type.executable_path)
    if bundled.exists():
        return bundled
    for name in SYSTEM_CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return Path(found)
    raise ConfigurationError(
        "no Chromium found: set CRAWL_BROWSER_EXECUTABLE, run `playwright install chromium`,"
        " or `apt-get install chromium`"
    )
