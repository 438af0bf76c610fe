"""The content processes of a worker (see `offload.ContentPool`): a template that has imported
the content work and forks a child for each socket the worker hands it, and each child's loop
(take a call from the worker, run it, send back its value or its exception)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
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
    connection.send(os.getpid())  # ready: its pid, for the worker to kill or lower it
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


def template(control: socket.socket) -> None:
    """Fork a child for each socket the worker sends over `control`, until it closes it.

    The imports above are paid once, here, not by every child: a child is ready in
    milliseconds, also when it replaces one killed for its page's budget."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1, 1)
        except ConnectionError:
            return
        if not message or not fds:
            return
        if os.fork() == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            with contextlib.suppress(ConnectionError):  # the worker went away
                serve(Connection(fds[0]))
            os._exit(0)
        os.close(fds[0])


if __name__ == "__main__":
    template(socket.socket(fileno=int(sys.argv[1])))
