"""The arguments of `crawlstream monitor` (kept apart so that parsing imports nothing heavy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def add_monitor(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    monitor = commands.add_parser("monitor", help="scheduled change checks (monitors)")
    sub = monitor.add_subparsers(dest="monitor_command", required=True)
    create = sub.add_parser("create", help="create a monitor; prints its id")
    create.add_argument("name")
    create.add_argument("urls", nargs="+", metavar="URL")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", default=None, help="5-field cron, e.g. '*/30 * * * *'")
    when.add_argument("--every", default=None, help="a text form: 'hourly', 'daily at 9:00'")
    create.add_argument("--timezone", default="UTC")
    create.add_argument(
        "--crawl",
        type=int,
        default=None,
        metavar="MAX_PAGES",
        help="crawl from the first URL, at most MAX_PAGES pages",
    )
    create.add_argument("--depth", type=int, default=1)
    create.add_argument("--tenant", default=None)
    create.add_argument(
        "--adaptive",
        default=None,
        metavar="MIN,MAX",
        help="seconds: check less often while nothing changes (StormCrawler's rule)",
    )
    sub.add_parser("list", help="every monitor").add_argument("--json", action="store_true")
    for name, text in (
        ("pause", "stop its ticks"),
        ("resume", "tick again (ticks missed while paused do not fire)"),
        ("run", "run a check now; prints its check id"),
        ("delete", "delete it"),
        ("checks", "its checks and their runs' states"),
    ):
        sub.add_parser(name, help=text).add_argument("monitor_id", metavar="ID")
