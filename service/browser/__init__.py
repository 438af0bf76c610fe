"""Browser: the Chromium pool, its request contexts, and rendering one page under a deadline."""

from service.browser.context import RequestContext
from service.browser.pool import BrowserPool
from service.browser.render import render_page
from service.browser.settle import SettleLimits

__all__ = ["BrowserPool", "RequestContext", "SettleLimits", "render_page"]
