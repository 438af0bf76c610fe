"""Monitors: schedules (cron, Firecrawl's text forms), the ticks they give, the exactly-once
firing protocol's pure decisions, a check's requests and summary, adaptive intervals (see
docs/monitors.md). The coordinator's scheduler (`worker/coordinator/monitors.py`) is the I/O
shell around them."""

from service.monitors.adaptive import Adaptive
from service.monitors.book import Known, MonitorBook
from service.monitors.checks import check_requests
from service.monitors.schedule import Schedule, ScheduleError
from service.monitors.summary import Summary, page_status, summarise
from service.monitors.ticks import Fire, Wait, check_id, check_of, decide, request_id_of

__all__ = [
    "Adaptive",
    "Fire",
    "Known",
    "MonitorBook",
    "Schedule",
    "ScheduleError",
    "Summary",
    "Wait",
    "check_id",
    "check_of",
    "check_requests",
    "decide",
    "page_status",
    "request_id_of",
    "summarise",
]
