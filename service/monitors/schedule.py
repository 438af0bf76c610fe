"""A monitor's schedule: a 5-field cron expression or one of Firecrawl's text forms, in a
time zone, and the ticks it gives. Pure.

Text forms (case-insensitive) become a cron expression, as Firecrawl normalises them:
`every minute`, `every N minutes` (N dividing 60), `hourly`, `every N hours` (N dividing
24), `daily`, `daily at H:MM`, `every day at H:MM`, `weekly`, `every <weekday> at H:MM`.
`every N seconds` is an interval of its own (ticks at multiples of N seconds since the Unix
epoch), allowed only when `CRAWL_MONITOR_MIN_INTERVAL` is that short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_STEPS: Final = 100_000
"""Steps of a next-tick search at most (a cron that never matches, e.g. 31 February)."""

GAP_SAMPLES: Final = 2_000
"""Consecutive ticks looked at to find a cron's shortest interval."""

RECENT_WINDOW: Final = timedelta(days=8)
"""How far back the latest due tick is first looked for (a longer outage walks from its
start)."""

_MONTHS: Final = (
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
)
_DAYS: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_WEEKDAYS: Final = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message says why (shown to the caller as is)."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    name_base: int = 0


_FIELDS: Final = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS, 1),
    _Field("day of week", 0, 7, _DAYS, 0),
)


def _value(text: str, spec: _Field) -> int:
    lowered = text.lower()
    if lowered in spec.names:
        return spec.names.index(lowered) + spec.name_base
    if not text.isdigit():
        raise ScheduleError(f"cron {spec.name}: {text!r} is not a number")
    number = int(text)
    if not spec.low <= number <= spec.high:
        raise ScheduleError(f"cron {spec.name}: {number} is outside {spec.low}-{spec.high}")
    return number


def _part(part: str, spec: _Field) -> set[int]:
    base, _, step_text = part.partition("/")
    step = 1
    if step_text:
        if not step_text.isdigit() or int(step_text) == 0:
            raise ScheduleError(f"cron {spec.name}: step {step_text!r} is not a positive number")
        step = int(step_text)
    if base == "*":
        low, high = spec.low, spec.high
    elif "-" in base:
        first, _, last = base.partition("-")
        low, high = _value(first, spec), _value(last, spec)
        if low > high:
            raise ScheduleError(f"cron {spec.name}: range {base!r} runs backwards")
    else:
        low = _value(base, spec)
        high = spec.high if step_text else low
    return set(range(low, high + 1, step))


def _parse_field(text: str, spec: _Field) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ScheduleError(f"cron {spec.name}: an empty list item")
        values |= _part(part, spec)
    return frozenset(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cron:
    """A parsed 5-field cron expression (minute hour day-of-month month day-of-week); day of
    month and day of week, when both are restricted, match either (as Vixie cron)."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    @classmethod
    def parse(cls, expression: str) -> Cron:
        fields = expression.split()
        if len(fields) != len(_FIELDS):
            raise ScheduleError(
                f"cron {expression!r}: 5 fields expected (minute hour day month weekday), "
                f"found {len(fields)}"
            )
        minutes, hours, days, months, weekdays = (
            _parse_field(text, spec) for text, spec in zip(fields, _FIELDS, strict=True)
        )
        return cls(
            expression=" ".join(fields),
            minutes=minutes,
            hours=hours,
            days=days,
            months=months,
            weekdays=frozenset(day % 7 for day in weekdays),
            any_day=fields[2] == "*",
            any_weekday=fields[4] == "*",
        )

    def _day_matches(self, moment: datetime) -> bool:
        by_day = moment.day in self.days
        by_weekday = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return by_day and by_weekday
        return by_day or by_weekday

    def next_local(self, after: datetime) -> datetime:
        """The first matching wall-clock minute strictly after `after` (naive, local)."""
        moment = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(MAX_STEPS):
            if moment.month not in self.months:
                moment = _next_month(moment)
            elif not self._day_matches(moment):
                moment = moment.replace(hour=0, minute=0) + timedelta(days=1)
            elif moment.hour not in self.hours:
                moment = moment.replace(minute=0) + timedelta(hours=1)
            elif moment.minute not in self.minutes:
                moment += timedelta(minutes=1)
            else:
                return moment
        raise ScheduleError(f"cron {self.expression!r} never matches")


def _next_month(moment: datetime) -> datetime:
    december = 12
    year, month = (
        (moment.year + 1, 1) if moment.month == december else (moment.year, moment.month + 1)
    )
    return moment.replace(year=year, month=month, day=1, hour=0, minute=0)


_EVERY: Final = re.compile(r"^every\s+(\d+)\s+(second|minute|hour)s?$")
_AT: Final = re.compile(r"^(?:daily|every\s+day)\s+at\s+(\d{1,2}):(\d{2})$")
_WEEKDAY_AT: Final = re.compile(r"^every\s+([a-z]+)\s+at\s+(\d{1,2}):(\d{2})$")
_FIXED: Final = {
    "every minute": "* * * * *",
    "hourly": "0 * * * *",
    "every hour": "0 * * * *",
    "daily": "0 0 * * *",
    "every day": "0 0 * * *",
    "weekly": "0 0 * * 0",
    "every week": "0 0 * * 0",
}


def _clock(hour: str, minute: str) -> tuple[int, int]:
    h, m = int(hour), int(minute)
    if h > 23 or m > 59:  # noqa: PLR2004 - a wall clock
        raise ScheduleError(f"{hour}:{minute} is not a time of day")
    return h, m


def text_to_cron(text: str) -> str | int:
    """The cron expression of a text form, or an interval in seconds (`every N seconds`)."""
    said = " ".join(text.lower().split())
    if said in _FIXED:
        return _FIXED[said]
    if match := _EVERY.match(said):
        count, unit = int(match[1]), match[2]
        if count == 0:
            raise ScheduleError(f"{text!r}: every 0 {unit}s is no schedule")
        if unit == "second":
            return count
        whole = 60 if unit == "minute" else 24
        if whole % count:
            raise ScheduleError(f"{text!r}: {count} does not divide {whole} {unit}s evenly")
        return f"*/{count} * * * *" if unit == "minute" else f"0 */{count} * * *"
    if match := _AT.match(said):
        hour, minute = _clock(match[1], match[2])
        return f"{minute} {hour} * * *"
    if (match := _WEEKDAY_AT.match(said)) and match[1] in _WEEKDAYS:
        hour, minute = _clock(match[2], match[3])
        return f"{minute} {hour} * * {_WEEKDAYS.index(match[1])}"
    raise ScheduleError(
        f"{text!r} is not a schedule this service reads: use a 5-field cron, or `every N "
        "minutes`, `every N hours`, `hourly`, `daily at H:MM`, `every monday at H:MM`, `weekly`"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """When a monitor ticks: a cron in a time zone, or every `interval_s` seconds."""

    cron: Cron | None
    interval_s: int | None
    zone: ZoneInfo

    @classmethod
    def of(cls, *, cron: str | None, text: str | None, timezone: str = "UTC") -> Schedule:
        """Exactly one of `cron` and `text`; an unknown time zone is an error."""
        if (cron is None) == (text is None):
            raise ScheduleError("give exactly one of `cron` and `text`")
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError(f"unknown time zone {timezone!r}") from None
        form: str | int = cron if cron is not None else text_to_cron(text or "")
        if isinstance(form, int):
            return cls(cron=None, interval_s=form, zone=zone)
        return cls(cron=Cron.parse(form), interval_s=None, zone=zone)

    @property
    def expression(self) -> str | None:
        """The normalised cron (None for a seconds interval)."""
        return None if self.cron is None else self.cron.expression

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after `moment` (aware, UTC)."""
        if self.interval_s is not None:
            epoch = int(moment.timestamp()) // self.interval_s * self.interval_s
            return datetime.fromtimestamp(epoch + self.interval_s, UTC)
        assert self.cron is not None  # noqa: S101 - one of the two, by construction
        local = moment.astimezone(self.zone).replace(tzinfo=None)
        while True:
            local = self.cron.next_local(local)
            tick = local.replace(tzinfo=self.zone).astimezone(UTC)
            if tick > moment:  # a wall-clock minute repeated when clocks go back
                return tick

    def latest_due(self, after: datetime, now: datetime) -> datetime | None:
        """The latest tick in `(after, now]`, or None: ticks missed before it are not
        wanted (a monitor checks the present, once)."""
        start = max(after, now - RECENT_WINDOW)
        found = self._last_between(start, now)
        if found is None and start > after:
            found = self._last_between(after, start)
        return found

    def _last_between(self, after: datetime, until: datetime) -> datetime | None:
        found = None
        tick = self.next_after(after)
        while tick <= until:
            found, tick = tick, self.next_after(tick)
        return found

    def shortest_gap_s(self, reference: datetime) -> float:
        """The shortest time between two consecutive ticks (over `GAP_SAMPLES` from
        `reference`)."""
        if self.interval_s is not None:
            return float(self.interval_s)
        shortest = float("inf")
        tick = self.next_after(reference)
        for _ in range(GAP_SAMPLES):
            following = self.next_after(tick)
            shortest = min(shortest, (following - tick).total_seconds())
            tick = following
        return shortest

    def check_interval(self, minimum_s: float, reference: datetime) -> None:
        """Refuse a schedule that ticks more often than `minimum_s` allows."""
        gap = self.shortest_gap_s(reference)
        if gap < minimum_s:
            raise ScheduleError(
                f"the schedule ticks every {gap:g} s at its shortest; this cluster's "
                f"CRAWL_MONITOR_MIN_INTERVAL is {minimum_s:g} s"
            )
