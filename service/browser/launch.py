"""How Chromium is found and launched: flags that work headless, as root, on a closed network."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Final

from service.egress.proxy import LOOPBACK
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

CRAWLER_FEATURES_OFF: Final = ("BackForwardCache", "SpareRendererForSitePerProcess")
"""What a browser that serves many contexts at once does without:

- the back/forward cache: a crawler never goes back; without it a page's last document is
  unloaded when the page navigates on, instead of kept frozen in memory (which also makes
  wiping a context for its next request cheaper: ~30 instead of ~40 CPU-ms a page here);
- the spare renderer: Chromium keeps one renderer process started ahead for the context
  that navigated last, and kills and restarts it whenever another context navigates. With 8
  request contexts taking turns that was a renderer start every few navigations: 20 CPU-ms
  a page, and every page of a wiped context reused its renderer only with it off (4
  contexts of 2 pages, 480 pages: 116.6 CPU-ms a page with it, 86.2 without, 84.3 for one
  shared context)."""

NO_UDP_FLAGS: Final = (
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)
"""WebRTC uses no UDP at all: no STUN, no TURN over UDP, no UDP candidates or checks (TURN
over TCP and TLS goes through the proxy, which judges it like any CONNECT). Without it, one
page's peer connections sent 404 UDP packets straight to 127.0.0.1, 127.0.0.2, ::1 and the
machine's own address; with it, none. Each build reads one spelling and ignores the other:
the full browser the first, the headless shell the second (without it the shell sent 94
datagrams to each of those addresses)."""

NO_RESOLVER_FLAG: Final = f"--host-resolver-rules=MAP * ^NOTFOUND, EXCLUDE {LOOPBACK}"
"""Chromium resolves no name itself: every name fails at once, before DNS or mDNS (WebRTC
otherwise resolves `stun:` hosts and `.local` candidates itself). Pages reach hosts only
through the proxy, which resolves and checks them; the proxy's own address is left alone.
The older `~NOTFOUND` does not work here: Chromium sends it out as an mDNS query."""

NO_QUIC_FLAG: Final = "--disable-quic"
"""No HTTP/3 for page loads. WebTransport ignores this flag; what keeps its QUIC in is the
proxy setting (with a proxy configured, Chromium sends no WebTransport packet at all)."""

EGRESS_ARGS: Final = (*NO_UDP_FLAGS, NO_RESOLVER_FLAG, NO_QUIC_FLAG)
"""Flags that keep every packet of the browser inside the egress proxy."""

CHROMIUM_ARGS: Final = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-features="
    + ",".join(PLAYWRIGHT_DISABLED_FEATURES + OMNIBOX_POPUP_FEATURES + CRAWLER_FEATURES_OFF),
    *EGRESS_ARGS,
)
"""Flags for every launch: headless as root, no traffic of Chromium's own, and no packet that
does not go through the egress proxy."""

DRIVER_CACHE_ENV: Final = "NODE_COMPILE_CACHE"
"""Where Node keeps the code it compiled, by the source's hash, for its next start."""


def keep_driver_compile_cache() -> None:
    """Let Playwright's driver (a Node process, one per worker) keep the code it compiles in
    this user's cache directory: a driver starts from it in 0.66 instead of 0.80 CPU s. Node
    checks each entry against its source and ignores a cache it cannot write or read; a
    `NODE_COMPILE_CACHE` already set is left as it is."""
    if DRIVER_CACHE_ENV in os.environ:
        return
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        directory = base / "crawlstream" / "node-compile-cache"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # no home directory, or none that can be written
        return
    os.environ[DRIVER_CACHE_ENV] = str(directory)


SYSTEM_CHROMIUM_NAMES: Final = (
    "chromium-headless-shell",
    "chromium",
    "chromium-browser",
    "google-chrome",
)
"""System browsers in order of preference. Chromium's headless shell (Debian's package
`chromium-headless-shell`, what Playwright itself launches for a headless Chromium) renders
without the full browser's user interface and its processes: about half the CPU a page (40
against 77 CPU-ms, 100 pages of a scripted page, docs/decisions/headless-shell.md)."""


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
    found = system_chromium()
    if found is not None:
        return found
    raise ConfigurationError(
        "no Chromium found: set CRAWL_BROWSER_EXECUTABLE, run `playwright install chromium`,"
        " or `apt-get install chromium`"
    )


def system_chromium() -> Path | None:
    """The first of `SYSTEM_CHROMIUM_NAMES` on the PATH."""
    for name in SYSTEM_CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return Path(found)
    return None
