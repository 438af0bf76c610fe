"""Backpressure on memory headroom: sampler -> snapshot -> governor (policy) -> gate.

`MemorySampler` keeps a fresh `MemorySnapshot` of the worker's cgroup and process tree;
`Governor` turns snapshots into admission, pause, shed and recycle decisions.
"""

from __future__ import annotations

from service.backpressure._thresholds import Level
from service.backpressure.governor import (
    Admission,
    AdmissionReason,
    Governor,
    GovernorSettings,
    PauseReason,
    newest_first,
)
from service.backpressure.probe import MemoryProbe, MemorySampler, SamplerSettings
from service.backpressure.snapshot import LimitSource, MemorySnapshot

__all__ = [
    "Admission",
    "AdmissionReason",
    "Governor",
    "GovernorSettings",
    "Level",
    "LimitSource",
    "MemoryProbe",
    "MemorySampler",
    "MemorySnapshot",
    "PauseReason",
    "SamplerSettings",
    "newest_first",
]
