"""A worker's content template, forked before its event loop (`reserve_template`)."""

from __future__ import annotations

from service.content import _child, offload


def reserve_template() -> None:
    """Fork the content template from this process now, for the worker's `ContentPool`.

    Call it before the event loop starts, while the process runs one thread: the fork shares
    the content work's imports, which the worker makes anyway (copy-on-write), where a
    template started with exec pays an interpreter and the imports again (0.33-0.48 CPU s a
    worker start here). A template that dies later is started with exec."""
    offload.reserve(_child.template)
