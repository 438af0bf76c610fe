"""Change tracking: each tracked page compared with its previous observation under its tag,
and every change put on a change feed (see docs/changes.md).

A pure core (`reading`: what a page says without the noise; `compare`: the status and the
diff), the history's key, record and store interface with its Kafka version, and
`ChangeTracker`, which a fetcher passes each tracked page's content through.
"""

from service.changes.compare import History, Observation, compare
from service.changes.history import HistoryRecord, HistoryStore, history_key
from service.changes.reading import Reading, read_html, read_text, shaping_of
from service.changes.store import KafkaHistoryStore
from service.changes.tracker import ChangeTracker, TrackedPage

__all__ = [
    "ChangeTracker",
    "History",
    "HistoryRecord",
    "HistoryStore",
    "KafkaHistoryStore",
    "Observation",
    "Reading",
    "TrackedPage",
    "compare",
    "history_key",
    "read_html",
    "read_text",
    "shaping_of",
]
