"""A canary 1-URL request's latency alone and beside each content bomb, in one run.

    .venv/bin/python bench/hostile.py [--samples 5]

One `crawlstream worker` with default content settings (`CRAWL_CONTENT_PROCESSES` 2,
`CRAWL_CONTENT_BUDGET` 20 s) behind a real broker. The canary is a 1-URL request of a test
site page, one at a time, from produce to its terminal event. It is measured alone, then
while each bomb runs on the same worker: a selector that backtracks exponentially
(`include_tags`), a PDF of 100 pages sharing one 1,000,000-character stream, and an
`extract` that copies a 210 KB page 10,000 times. Prints the medians, each ratio to alone
(target: within 2x), and how each bomb ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid

from _worker import bench_worker  # first: it puts tests/support on the path

# isort: split
from _bombs import BOMB_SELECTOR
from testsite import serve

from service.broker import LocalBroker
from service.contracts import PageResult, ProgressEvent
from service.messaging.chunks import Reassembler

WARMUP = 2
"""Canary samples measured first and left out."""

BOMB_START_S = 1.5
"""Time the bomb's page is given to reach its content work before the canaries go."""

DEADLINE_S = 120.0

BOMBS = {
    "selector": ("/bombs/nested-divs", {"include_tags": [BOMB_SELECTOR]}),
    "pdf": ("/bombs/pdf", {}),
    "extract": (
        "/bombs/many-divs?blocks=10",
        {"extract": {"base_selector": "div", "fields": [{"name": "t", "type": "text"}]}},
    ),
}


async def _send(worker, url: str, options: dict[str, object]) -> str:  # noqa: ANN001
    request_id = f"h-{uuid.uuid4().hex[:10]}"
    body = {"request_id": request_id, "urls": [url], "options": options}
    await worker.producer.send_and_wait(
        worker.settings.requests_topic, json.dumps(body).encode(), key=request_id.encode()
    )
    return request_id


class Ends:
    """Terminal events and results read so far, by request id."""

    def __init__(self) -> None:
        self.ended: dict[str, asyncio.Event] = {}
        self.results: dict[str, PageResult] = {}
        self.chunks = Reassembler()  # a large result comes in chunks

    def event(self, request_id: str) -> asyncio.Event:
        return self.ended.setdefault(request_id, asyncio.Event())

    async def read(self, worker) -> None:  # noqa: ANN001
        async for record in worker.consumer:
            if record.topic == worker.settings.results_topic:
                whole = self.chunks.add(record.value, list(record.headers))
                if whole is not None:
                    result = PageResult.model_validate_json(whole)
                    self.results[result.request_id] = result
                continue
            event = ProgressEvent.model_validate_json(record.value)
            if event.is_terminal:
                self.event(event.request_id).set()


async def _canaries(worker, ends: Ends, url: str, samples: int) -> list[float]:  # noqa: ANN001
    times = []
    for n in range(samples):
        start = time.perf_counter()
        request_id = await _send(worker, f"{url}?canary={uuid.uuid4().hex[:6]}-{n}", {})
        await asyncio.wait_for(ends.event(request_id).wait(), DEADLINE_S)
        times.append(time.perf_counter() - start)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    async with (
        serve() as site,
        LocalBroker() as broker,
        bench_worker(broker.bootstrap_servers, site.port, 8, results=True) as worker,
    ):
        ends = Ends()
        reader = asyncio.create_task(ends.read(worker))
        canary = site.url("/page/3")
        alone = (await _canaries(worker, ends, canary, args.samples + WARMUP))[WARMUP:]
        beside: dict[str, list[float]] = {}
        outcome: dict[str, str] = {}
        for name, (path, options) in BOMBS.items():
            bomb = await _send(worker, site.url(path), options)
            await asyncio.sleep(BOMB_START_S)
            beside[name] = await _canaries(worker, ends, canary, args.samples)
            started = time.perf_counter()
            await asyncio.wait_for(ends.event(bomb).wait(), DEADLINE_S)
            await asyncio.sleep(0.5)  # the result precedes its terminal event; read it too
            outcome[name] = _ended(ends.results.get(bomb), time.perf_counter() - started)
        reader.cancel()
    base = statistics.median(alone)
    print(f"canary: 1-URL request, produce to terminal event; {args.samples} samples each")
    print(f"{'':<28}{'median ms':>10}{'ratio':>8}  bomb ended")
    print(f"{'alone':<28}{base * 1000:>10.0f}{1.0:>8.2f}")
    for name, times in beside.items():
        median = statistics.median(times)
        print(f"{'beside ' + name:<28}{median * 1000:>10.0f}{median / base:>8.2f}  {outcome[name]}")
    print("target: every ratio within 2x")


def _ended(result: PageResult | None, after_s: float) -> str:
    if result is None:
        return "no result read"
    size = len(result.model_dump_json())
    how = "ok" if result.ok else (result.error.code.value if result.error else "?")
    cut = ", truncated" if result.truncated else ""
    return f"{how}{cut}, {size / 1e6:.1f} MB, {after_s:.0f} s after its canaries"


if __name__ == "__main__":
    asyncio.run(main())
