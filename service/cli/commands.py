"""The sub-commands; each returns the process exit code."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import sys
from typing import TYPE_CHECKING

from service.broker import LocalBroker
from service.client import CrawlClient
from service.contracts import CrawlOptions, CrawlSpec
from service.metrics import Metrics

if TYPE_CHECKING:
    import argparse

    from service.settings import Settings


async def run_worker(args: argparse.Namespace, settings: Settings) -> int:
    from service.worker.app import Worker  # noqa: PLC0415 - the browser stack only for workers

    if args.role is not None:
        settings = settings.model_copy(update={"role": args.role})
    await Worker(settings, Metrics()).run()
    return 0


async def run_gateway(args: argparse.Namespace, settings: Settings) -> int:
    from service.gateway import serve  # noqa: PLC0415 - the HTTP stack only when needed
    from service.mcp.http import mount  # noqa: PLC0415

    await serve(settings, args.port, mounts=[mount])
    return 0


async def run_mcp(_: argparse.Namespace, settings: Settings) -> int:
    from service.mcp.stdio import serve_stdio  # noqa: PLC0415 - the HTTP stack only when needed

    await serve_stdio(settings)
    return 0


async def run_webhooks(_: argparse.Namespace, settings: Settings) -> int:
    from service.webhooks import Dispatcher  # noqa: PLC0415

    await Dispatcher(settings).run()
    return 0


async def run_monitor(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli.monitors import run_monitor as monitor  # noqa: PLC0415

    return await monitor(args, settings)


async def run_cache(args: argparse.Namespace, settings: Settings) -> int:
    from service.cache.purge import Purge, purge  # noqa: PLC0415

    removed = await purge(settings, Purge(url=args.url, host=args.host))
    print(f"{removed} cache entries purged", flush=True)  # noqa: T201
    return 0


async def run_broker(args: argparse.Namespace, _: Settings) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with LocalBroker(port=args.port, data_dir=args.data_dir) as broker:
        print(f"Kafka broker ready at {broker.bootstrap_servers}", flush=True)  # noqa: T201
        await stop.wait()
    return 0


async def run_submit(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli.follow_view import follow_json, follow_live  # noqa: PLC0415

    fields: dict[str, object] = {
        "wait_until": args.wait_until,
        "wait_for": args.wait_for,
        "timeout_ms": args.timeout_ms,
    }
    if args.formats:
        fields["formats"] = args.formats
    if args.deadline_ms is not None:
        fields["deadline_ms"] = args.deadline_ms
    options = CrawlOptions.model_validate(fields)
    crawl = _crawl_spec(args)
    async with CrawlClient(settings) as client:
        submission = await client.submit(
            args.urls, options, request_id=args.request_id, crawl=crawl
        )
        if not args.json:
            print(submission.request_id, flush=True)  # noqa: T201
        if not args.follow:
            return 0
        if args.json:
            return await follow_json(client, submission)
        return await follow_live(client, submission)


def _crawl_spec(args: argparse.Namespace) -> CrawlSpec | None:
    """The deep crawl the flags ask for: `--max-pages` makes one, the others refine it."""
    deep_flags = (args.depth, args.scope, args.include, args.exclude)
    if args.max_pages is None:
        if any(flag is not None for flag in deep_flags) or args.sitemap:
            raise SystemExit(
                "--depth, --scope, --include, --exclude and --sitemap need --max-pages"
            )
        return None
    fields: dict[str, object] = {"max_pages": args.max_pages, "sitemap": args.sitemap}
    for name in ("depth", "scope", "include", "exclude"):
        value = getattr(args, name)
        if value is not None:
            fields["max_depth" if name == "depth" else name] = value
    return CrawlSpec.model_validate(fields)


async def run_cancel(args: argparse.Namespace, settings: Settings) -> int:
    async with CrawlClient(settings) as client:
        await client.cancel(args.request_id, args.reason)
    print(f"{args.request_id}: cancel sent")  # noqa: T201
    return 0


async def run_status(args: argparse.Namespace, settings: Settings) -> int:
    async with CrawlClient(settings) as client:
        status = await client.status(args.request_id)
    if args.json:
        print(json.dumps(dataclasses.asdict(status)))  # noqa: T201
    else:
        print(status.line())  # noqa: T201
    return 0


async def run_follow(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli.follow_view import follow_json, follow_live  # noqa: PLC0415

    async with CrawlClient(settings) as client:
        status = await client.status(args.request_id)
        if status.state == "unknown":
            print(f"{status.line()}; waiting for it", file=sys.stderr, flush=True)  # noqa: T201
        if args.json:
            return await follow_json(client, args.request_id)
        return await follow_live(client, args.request_id)


async def run_demo(_: argparse.Namespace, settings: Settings) -> int:
    from service.cli.demo import demo  # noqa: PLC0415

    return await demo(settings)


async def run_schemas(args: argparse.Namespace, _: Settings) -> int:
    from service import schema_export  # noqa: PLC0415

    if args.check:
        stale = schema_export.differences(args.out)
        for name in stale:
            print(f"{args.out / name} differs from the models", file=sys.stderr)  # noqa: T201
        return 1 if stale else 0
    for name in schema_export.write(args.out):
        print(args.out / name)  # noqa: T201
    return 0


async def run_settings(args: argparse.Namespace, _: Settings) -> int:
    from service import settings_doc  # noqa: PLC0415

    if args.check:
        page = args.out or settings_doc.SETTINGS_PAGE
        if settings_doc.differs(page):
            print(f"{page} differs from the settings", file=sys.stderr)  # noqa: T201
            return 1
        return 0
    if args.out is None:
        print(settings_doc.settings_page(), end="")  # noqa: T201
        return 0
    args.out.write_text(settings_doc.settings_page(), encoding="utf-8")
    print(args.out)  # noqa: T201
    return 0


async def run_topics(args: argparse.Namespace, settings: Settings) -> int:
    from service.cli import topics  # noqa: PLC0415

    if args.topics_command == "create":
        return await topics.create(settings)
    return await topics.partition(settings, args.key)


async def run_dead_letter(args: argparse.Namespace, settings: Settings) -> int:
    from service.messaging.replay import replay_dead_letters  # noqa: PLC0415

    count = await replay_dead_letters(
        settings,
        partition=args.partition,
        from_offset=args.from_offset,
        to_offset=args.to_offset,
        request_id=args.request_id,
    )
    print(f"re-published {count} dead letter(s) to {settings.requests_topic}")  # noqa: T201
    return 0
