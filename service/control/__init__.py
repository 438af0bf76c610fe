"""Job control: cancels from the compacted control topic, and the runs they stop.

A pure core (`CancelRegistry`, `ActiveRuns`, `parse_control`) and a thin I/O shell
(`ControlReader`, a group-less consumer of every partition of the control topic).
"""

from service.control.active import ActiveRuns, Stoppable
from service.control.reader import ControlReader
from service.control.records import ControlRecord, ControlRecords
from service.control.registry import (
    Applied,
    Cancel,
    CancelRegistry,
    ControlAction,
    Skip,
    SkipReason,
    parse_control,
)

__all__ = [
    "ActiveRuns",
    "Applied",
    "Cancel",
    "CancelRegistry",
    "ControlAction",
    "ControlReader",
    "ControlRecord",
    "ControlRecords",
    "Skip",
    "SkipReason",
    "Stoppable",
    "parse_control",
]
