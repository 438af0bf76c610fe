"""A port for a process a test starts, which the test must know before the process binds it.

`bind(("127.0.0.1", 0))` hands out a port from the kernel's ephemeral range, and so does every
`connect` and every other `bind(0)` of the machine: between the test's probe and the child's
own bind, another process (the other xdist worker starting a broker, an outgoing connection)
may be given the same port ("address already in use", seen in CI). A port below the ephemeral
range is never handed out that way, so only another test choosing at random could take it.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import Final

EPHEMERAL_RANGE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")

LOWEST: Final = 20_000
"""Lowest port chosen (well above the ports of system services)."""

TRIES: Final = 200


def unused_port() -> int:
    """A port below the ephemeral range that nothing listens on now."""
    highest = _ephemeral_start() - 1
    for _ in range(TRIES):
        port = random.randint(LOWEST, highest)
        with socket.socket() as probe:
            try:
                probe.bind(("0.0.0.0", port))  # noqa: S104 (as the worker's metrics port binds)
            except OSError:
                continue
            return port
    raise RuntimeError(f"no unused port between {LOWEST} and {highest}")


def _ephemeral_start() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768
