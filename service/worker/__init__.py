"""The worker: consumer -> admission -> crawl -> publish -> commit."""

from service.worker.app import Worker

__all__ = ["Worker"]
