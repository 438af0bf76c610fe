"""`crawlstream` sub-commands: worker, gateway, mcp, webhooks, broker, topics, submit, cancel,
status, follow, demo, schemas, settings, dead-letter, monitor."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError

from service.cli.monitor_args import add_monitor
from service.contracts import Format
from service.errors import ConfigurationError, CrawlstreamError
from service.logs import configure_logging
from service.messaging.kafka_config import KafkaAuthenticationError, authentication_reported
from service.settings import load_settings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from service.settings import Settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawlstream", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_servers(commands)
    broker = commands.add_parser("broker", help="run a local single-node Kafka (KRaft)")
    broker.add_argument("--port", type=int, default=9092)
    broker.add_argument("--data-dir", type=Path, default=None)
    submit = commands.add_parser("submit", help="produce a crawl request")
    submit.add_argument("urls", nargs="+", metavar="URL")
    submit.add_argument("--follow", action="store_true", help="show progress and results")
    submit.add_argument("--json", action="store_true", help="print raw messages, one per line")
    submit.add_argument(
        "--format",
        dest="formats",
        action="append",
        choices=[f.value for f in Format],
        help="repeat for several",
    )
    submit.add_argument("--wait-for", default=None, help="CSS selector to wait for")
    submit.add_argument(
        "--wait-until", default="load", choices=["load", "domcontentloaded", "networkidle"]
    )
    submit.add_argument("--timeout-ms", type=int, default=30_000)
    submit.add_argument("--request-id", default=None)
    submit.add_argument("--deadline-ms", type=int, default=None, help="budget of the whole request")
    deep = submit.add_argument_group("deep crawl (follow links from the URLs)")
    deep.add_argument("--max-pages", type=int, default=None, help="crawl links, at most N pages")
    deep.add_argument("--depth", type=int, default=None, help="links followed from a seed (1)")
    deep.add_argument("--scope", choices=["host", "domain", "prefix"], default=None)
    deep.add_argument("--include", action="append", default=None, metavar="REGEX")
    deep.add_argument("--exclude", action="append", default=None, metavar="REGEX")
    deep.add_argument("--sitemap", action="store_true", help="also seed from the sitemaps")
    cancel = commands.add_parser("cancel", help="cancel a request (every run of its id)")
    cancel.add_argument("request_id", metavar="ID")
    cancel.add_argument("--reason", default=None, help="short, shown in the terminal event")
    status = commands.add_parser("status", help="the state of a request's latest run")
    status.add_argument("request_id", metavar="ID")
    status.add_argument("--json", action="store_true", help="print it as JSON")
    follow = commands.add_parser("follow", help="stream a request submitted anywhere")
    follow.add_argument("request_id", metavar="ID")
    follow.add_argument("--json", action="store_true", help="print raw messages, one per line")
    demo = commands.add_parser("demo", help="broker + worker + sample site + one request")
    demo.add_argument("--keep-broker", action="store_true", help=argparse.SUPPRESS)
    schemas = commands.add_parser("schemas", help="write JSON Schemas and AsyncAPI")
    schemas.add_argument("--out", type=Path, default=Path("schemas"))
    schemas.add_argument("--check", action="store_true", help="fail when files differ")
    _add_settings(commands)
    topics = commands.add_parser("topics", help="the service's topics")
    topics_commands = topics.add_subparsers(dest="topics_command", required=True)
    topics_commands.add_parser(
        "create", help="create the missing topics with the configured partitions"
    )
    partition = topics_commands.add_parser(
        "partition", help="the partition of each topic a request_id's messages are on"
    )
    partition.add_argument("key", metavar="REQUEST_ID")
    _add_cache(commands)
    _add_dead_letter(commands)
    add_monitor(commands)
    return parser


def _add_dead_letter(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dead = commands.add_parser("dead-letter", help="dead-letter tools")
    dead_commands = dead.add_subparsers(dest="dead_command", required=True)
    replay = dead_commands.add_parser("replay", help="re-publish dead letters as requests")
    replay.add_argument("--partition", type=int, default=None)
    replay.add_argument("--from-offset", type=int, default=0)
    replay.add_argument("--to-offset", type=int, default=None, help="inclusive")
    replay.add_argument("--request-id", default=None)


def _add_servers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser("worker", help="consume crawl requests and pages until SIGTERM")
    worker.add_argument(
        "--role",
        choices=("all", "coordinator", "fetcher"),
        default=None,
        help="coordinator (requests), fetcher (pages) or all; default CRAWL_ROLE (all)",
    )
    gateway = commands.add_parser("gateway", help="serve Firecrawl's v2 HTTP API over the cluster")
    gateway.add_argument("--port", type=int, default=None, help="default CRAWL_GATEWAY_PORT")
    commands.add_parser("mcp", help="serve the MCP tools on stdin/stdout (Firecrawl's names)")
    commands.add_parser("webhooks", help="deliver the webhooks of every job (a consumer group)")


def _add_cache(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cache = commands.add_parser("cache", help="page cache tools")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True)
    purge = cache_commands.add_parser("purge", help="remove the entries of a URL or a host")
    which = purge.add_mutually_exclusive_group(required=True)
    which.add_argument("--url", default=None, help="every entry of this URL (normalised)")
    which.add_argument("--host", default=None, help="every entry of this host")


def _add_settings(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    page = commands.add_parser("settings", help="the settings page (Markdown)")
    page.add_argument("--out", type=Path, default=None, help="write it here")
    page.add_argument("--check", action="store_true", help="fail when --out differs")


def main(argv: Sequence[str] | None = None) -> None:
    """Run one command; an expected failure ends it with one `crawlstream: ...` line."""
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        configure_logging(settings)
        _before_loop(args, settings)
        with authentication_reported(settings):
            code = asyncio.run(_dispatch(args, settings))
    except KafkaAuthenticationError as exc:
        code = _fail(str(exc), 2)
    except ConfigurationError as exc:
        code = _fail(f"configuration error: {exc}", 2)
    except CrawlstreamError as exc:
        code = _fail(str(exc), 1)
    except KafkaError as exc:
        code = _fail(f"Kafka error: {exc}", 1)
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


def _before_loop(args: argparse.Namespace, settings: Settings) -> None:
    """What a command does while its process runs one thread: a worker that fetches forks its
    content template here (`service.content.template.reserve_template`)."""
    if args.command == "worker" and (args.role or settings.role) != "coordinator":
        from service.content.template import reserve_template  # noqa: PLC0415 - workers only

        reserve_template()


def _fail(message: str, code: int) -> int:
    print(f"crawlstream: {message}", file=sys.stderr)  # noqa: T201
    return code


async def _dispatch(args: argparse.Namespace, settings: object) -> int:
    from service.cli import commands  # noqa: PLC0415 - heavy imports only when needed

    handler = getattr(commands, f"run_{args.command.replace('-', '_')}")
    result: int = await handler(args, settings)
    return result
