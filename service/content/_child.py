"""The loop of a content process: take a call from the worker, run it, send back its value
or its exception (see `offload.ContentPool`)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import Final

# The work a content process runs, imported before its first call: the import is paid at
# start, while the process waits for work, not within a page's budget.
import service.content.extract
import service.content.page
import service.content.pdf  # noqa: F401
from service.content.offload import ContentFailedError

NICENESS: Final = 5
"""A content process runs below the worker's priority: a page's content work never slows the
worker's event loop (Kafka, every other page's navigation) on a busy machine; the content
processes share what is left equally."""


def serve(connection: Connection) -> None:
    """Run the calls `connection` brings until the worker closes it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when a child ends
    os.nice(NICENESS)
    connection.send(None)  # ready: the imports are done
    while True:
        try:
            function, arguments = connection.recv()
        except EOFError:
            return
        try:
            answer: tuple[bool, object] = (True, function(*arguments))
        except Exception as exc:  # noqa: BLE001 (the caller raises it in the worker)
            answer = (False, exc)
        try:
            connection.send(answer)
        except (RecursionError, pickle.PicklingError, TypeError, AttributeError) as exc:
            connection.send((False, ContentFailedError(f"{type(exc).__name__}: {exc}")))


if __name__ == "__main__":
    with contextlib.suppress(ConnectionError):  # the worker went away: nothing to answer
        serve(Connection(int(sys.argv[1])))
