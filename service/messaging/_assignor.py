"""The partition assignor of the requests consumer: aiokafka's sticky one, made safe to use.

Two defects of aiokafka 0.14 shape this module:

- `perform_group_join` sends one JoinGroup per configured assignor, the first with only the
  first protocol, the next with both (its retry loop sits inside the loop that builds the
  protocol list). Each second JoinGroup changes the member's metadata, so the coordinator
  starts another rebalance, and members that join together keep restarting each other's
  rebalances: three workers started at once held no partition for minutes (issue 18). One
  assignor means one JoinGroup per join.
- The sticky assignor keeps its state (the last assignment and generation) on the class, and
  aiokafka never tells it the generation. Each consumer gets a class of its own, and
  `learn_generation` is called from the assignment callback, so a member that comes back with
  an old claim loses to the current owner instead of tying with it at generation -1.
"""

from __future__ import annotations

from typing import Final

from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

PROTOCOL: Final = StickyPartitionAssignor.name
"""The group protocol name every worker announces ("sticky"): workers of the releases that
offered sticky and round robin share it, so a rolling upgrade keeps one group."""


def sticky_assignor() -> type[StickyPartitionAssignor]:
    """A sticky assignor class of one consumer's own (its state lives on the class)."""
    return type(
        "CrawlstreamStickyAssignor",
        (StickyPartitionAssignor,),
        {"member_assignment": None, "generation": StickyPartitionAssignor.DEFAULT_GENERATION_ID},
    )


def learn_generation(assignor: type[StickyPartitionAssignor], generation: int) -> None:
    """Tell `assignor` the generation its last assignment belongs to (aiokafka does not)."""
    assignor.on_generation_assignment(generation)
