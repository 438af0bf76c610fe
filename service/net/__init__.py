"""Net: the one host identity, forbidden address ranges and the URL policy."""

from service.net.policy import BlockedUrlError, UnresolvableHostError, UrlPolicy

__all__ = ["BlockedUrlError", "UnresolvableHostError", "UrlPolicy"]
