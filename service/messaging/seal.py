"""Internal records name their deployment and carry an authenticity tag.

Only workers write the internal topics (pages, frontier, hosts, cache). Every record a
worker writes there carries two headers: `crawlstream-deployment` (its `CRAWL_GROUP_ID`)
and `crawlstream-tag`, an HMAC-SHA256 over the deployment, the topic, the key and the whole
value (a chunked value's tag is on every chunk and checked once the value is joined), keyed
by `CRAWL_CLUSTER_SECRET`. A reader takes a record only when both hold: a record of another
deployment (a topic shared by mistake) is `foreign`, one without a valid tag `forged`; either
is counted, logged once per topic and reason, and skipped. Kafka ACLs (deploy/kafka/acls.sh)
keep producers off these topics; the tag keeps a deployment without ACLs closed too.
"""

from __future__ import annotations

import hashlib
import hmac
from enum import StrEnum
from typing import TYPE_CHECKING, Final

from service.logs import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from service.messaging.chunks import Headers
    from service.settings import Settings

log = get_logger(__name__)

DEPLOYMENT_HEADER: Final = "crawlstream-deployment"
TAG_HEADER: Final = "crawlstream-tag"

_DOMAIN: Final = b"crawlstream-seal-v1"
"""Bound into every tag: a tag of this scheme is never valid for another use of the key."""

_UNAUTHENTICATED: Final = b"crawlstream-unauthenticated-key"
"""With no cluster secret, the key is derived from this and the deployment's name."""


class SealCheck(StrEnum):
    """What a reader makes of an internal record's headers."""

    AUTHENTIC = "authentic"
    FOREIGN = "foreign"
    """Written by another deployment (its `crawlstream-deployment` is not ours)."""
    FORGED = "forged"
    """No tag, or a tag that does not match: not written by a worker holding our key."""


class Seal:
    """Tags the records this worker writes to the internal topics; checks those it reads."""

    def __init__(
        self,
        deployment: str,
        key: bytes,
        topics: Iterable[str],
        *,
        authenticated: bool,
        on_rejected: Callable[[str, SealCheck], None] | None = None,
    ) -> None:
        self.deployment = deployment
        self.authenticated = authenticated
        """A cluster secret keys the tags (else anyone who knows the name can forge one)."""
        self._key = key
        self._topics = frozenset(topics)
        self._on_rejected = on_rejected
        self._logged: set[tuple[str, SealCheck]] = set()

    @classmethod
    def from_settings(
        cls, settings: Settings, on_rejected: Callable[[str, SealCheck], None] | None = None
    ) -> Seal:
        secret = settings.cluster_secret.get_secret_value() if settings.cluster_secret else ""
        deployment = settings.deployment
        if secret:
            key = secret.encode()
        else:
            key = hashlib.sha256(_UNAUTHENTICATED + b"\0" + deployment.encode()).digest()
        topics = (
            settings.pages_topic,
            settings.frontier_topic,
            settings.hosts_topic,
            settings.cache_index_topic,
            settings.cache_bodies_topic,
        )
        return cls(deployment, key, topics, authenticated=bool(secret), on_rejected=on_rejected)

    def seals(self, topic: str) -> bool:
        """`topic` is one of the deployment's internal topics."""
        return topic in self._topics

    def headers(self, topic: str, key: bytes | None, value: bytes) -> Headers:
        """The headers that name this deployment and tag the record."""
        return [
            (DEPLOYMENT_HEADER, self.deployment.encode()),
            (TAG_HEADER, self._tag(self.deployment, topic, key, value).encode()),
        ]

    def check(
        self, topic: str, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]]
    ) -> SealCheck:
        """Whether a record read from `topic` is this deployment's and authentic."""
        found = {name: raw for name, raw in headers if name in {DEPLOYMENT_HEADER, TAG_HEADER}}
        deployment = found.get(DEPLOYMENT_HEADER)
        tag = found.get(TAG_HEADER)
        if deployment is not None and deployment != self.deployment.encode():
            return SealCheck.FOREIGN
        if tag is None:
            return SealCheck.FORGED
        wanted = self._tag(self.deployment, topic, key, value).encode()
        return SealCheck.AUTHENTIC if hmac.compare_digest(tag, wanted) else SealCheck.FORGED

    def admits(
        self, topic: str, key: bytes | None, value: bytes, headers: Sequence[tuple[str, bytes]]
    ) -> bool:
        """`check`, with a rejected record counted and logged (once per topic and reason)."""
        verdict = self.check(topic, key, value, headers)
        if verdict is SealCheck.AUTHENTIC:
            return True
        if self._on_rejected is not None:
            self._on_rejected(topic, verdict)
        if (topic, verdict) not in self._logged:
            self._logged.add((topic, verdict))
            deployment = dict(headers).get(DEPLOYMENT_HEADER, b"").decode(errors="replace")
            log.warning(
                "internal.record_rejected",
                topic=topic,
                reason=str(verdict),
                deployment=deployment[:200] or None,
                ours=self.deployment,
                note="logged once per topic and reason; counted in "
                "crawl_internal_records_rejected_total",
            )
        return False

    def _tag(self, deployment: str, topic: str, key: bytes | None, value: bytes) -> str:
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in (_DOMAIN, deployment.encode(), topic.encode(), key or b""):
            mac.update(len(part).to_bytes(4, "big"))
            mac.update(part)
        mac.update(value)
        return mac.hexdigest()
