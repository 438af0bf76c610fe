"""Egress: the closed proxy every page and request of a worker goes out through."""

from service.egress.proxy import EgressProxy
from service.egress.refusals import RefusedTargets

__all__ = ["EgressProxy", "RefusedTargets"]
