"""Crawling: the browser pool, page fetch, extraction, the URL policy and egress proxy."""

from service.crawling._settle import SettleLimits
from service.crawling.browser import BrowserPool, RequestContext
from service.crawling.egress_proxy import EgressProxy
from service.crawling.extraction import Extracted, extract
from service.crawling.fetch import PageContent, fetch_page
from service.crawling.refusals import RefusedTargets
from service.crawling.url_policy import BlockedUrlError, UnresolvableHostError, UrlPolicy

__all__ = [
    "BlockedUrlError",
    "BrowserPool",
    "EgressProxy",
    "Extracted",
    "PageContent",
    "RefusedTargets",
    "RequestContext",
    "SettleLimits",
    "UnresolvableHostError",
    "UrlPolicy",
    "extract",
    "fetch_page",
]
