"""A Firecrawl-compatible HTTP API (v2) over the cluster: any replica answers for any job.

Stateless: a job is its request record on the requests topic; its status is folded from the
progress topic into a view every replica keeps (rebuilt at start); its documents are read
from its partition of the results topic, a page at a time, by cursor.
"""

from __future__ import annotations

from service.gateway.app import create_app, serve

__all__ = ["create_app", "serve"]
