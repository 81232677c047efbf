"""When a question points in time: "yesterday", "last week", "in March", "two sessions ago".

Recall puts the memories said within the window a question names before the others (see
``memory._hybrid``), so "what did I say about the printer last week?" finds last week's
exchange about the printer rather than a better worded one from June. A few documented
English phrasings are understood, relative to the time the question is asked, in that
time's zone; anything else gives no window and recall ranks by relevance alone.

Times are stored and compared as UTC ISO strings of one fixed shape (``iso``), so a window
test is a string comparison.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo

__all__ = ["CLOCK_SKEW", "TimeRef", "dated_line", "iso", "parse_time", "time_ref", "timestamp"]

_MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for name in names
}
# Full names only: "sun", "sat" and "wed" are words too.
_WEEKDAYS = {
    name: i
    for i, name in enumerate(
        ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    )
}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
    "several": 4,
}
_COUNT = (
    r"(?P<n>\d{1,3}|a couple of|a few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten)"
)
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")"
_WEEKDAY = r"(?P<weekday>" + "|".join(sorted(_WEEKDAYS, key=len, reverse=True)) + r")"


@dataclass(frozen=True)
class TimeRef:
    """A window ``[start, end)`` as UTC ISO strings, or a count of sessions back (1 = the
    latest conversation before this one)."""

    start: str = ""
    end: str = ""
    sessions_back: int = 0
    #: the question asks how things stand now ("now", "these days", "still"): of what
    #: was said on it, the newest counts (see ``memory._hybrid``)
    present: bool = False

    @property
    def window(self) -> tuple[str, str] | None:
        return (self.start, self.end) if self.start else None


def iso(moment: datetime) -> str:
    """``moment`` as the one UTC string shape memories are stored and compared with (a
    naive time counts as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    # isoformat, not strftime: "%Y" drops the leading zeros of years before 1000
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


#: How far ahead of this machine's clock a time said to be past may be (other clocks, a
#: zone written wrong by an hour or so); later is refused as a typo.
CLOCK_SKEW = timedelta(days=1)


def timestamp(at: str) -> float:
    """A stored or given time as a UTC timestamp, for ordering what was said: times in
    other zones compare right, and one that cannot be read counts as the oldest (a
    memory's time is never a reason to fail a recall)."""
    try:
        moment = _parsed(at, "at")
    except (TypeError, ValueError):
        return float("-inf")
    return moment.timestamp()


def parse_time(
    value: datetime | date | str | None, what: str = "at", *, past: bool = False
) -> datetime:
    """A datetime from a datetime, a date (noon UTC, as an ISO date string), an ISO 8601
    string or None (now), timezone-aware.
    ``past``: a time given must not be more than ``CLOCK_SKEW`` ahead of now (a conversation
    to remember, a turn replayed at its time): a year typed wrong (2062 for 2026) would
    make that conversation the newest for every question about "now", ever after."""
    moment = _parsed(value, what)
    if past and value is not None and moment > datetime.now(timezone.utc) + CLOCK_SKEW:
        raise ValueError(
            f"{what} is in the future ({iso(moment)}): it must be a time that has passed; "
            "check the year"
        )
    return moment


#: The latest time a memory is reckoned from.
_LATEST = datetime.max.replace(tzinfo=timezone.utc) - CLOCK_SKEW

#: The time a date given alone (``at="2026-03-14"``) stands for.
_NOON = time(12, tzinfo=timezone.utc)


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _zoned(value: datetime, *, typed: bool) -> datetime:
    """``value`` with a zone. A naive ``datetime`` (``datetime.now()``) is this machine's
    local time, as Python reads one (read as UTC, "now" in Tokyo was stored nine hours
    ahead); a string without a zone is UTC, as exports write their times."""
    if value.tzinfo is not None:
        return value
    if typed:
        try:
            return value.astimezone()
        except (OverflowError, OSError, ValueError):  # beyond what the platform's clock knows
            pass
    return value.replace(tzinfo=timezone.utc)


def _parsed(value: datetime | date | str | None, what: str) -> datetime:
    if value is None:
        # this machine's zone, as a naive datetime is read (``_zoned``): in UTC, "today" at
        # 6 am in Tokyo was yesterday, and what was remembered at 1 am was not today's
        return datetime.now().astimezone()
    given = value
    if isinstance(value, str):
        text = value.strip()
        try:
            if _is_date(text):
                # that day in every zone within 12 h of UTC: midnight UTC is the day
                # before in New York, so "what did I say on March 14?" missed it
                value = datetime.combine(date.fromisoformat(text), _NOON)
            else:
                value = datetime.fromisoformat(  # RFC 3339 allows a lower-case "z"
                    text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
                )
        except ValueError:
            raise ValueError(
                f"{what}={given!r} is not an ISO 8601 date or time (e.g. '2026-03-14T09:30:00+01:00')"
            ) from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, _NOON)  # as its ISO string "2026-03-14" is read
    if not isinstance(value, datetime):
        raise TypeError(
            f"{what} must be a datetime, a date or an ISO 8601 string, not {type(value).__name__}"
        )
    moment = _zoned(value, typed=isinstance(given, datetime))
    # stored and compared in UTC, with a day's room after it (``CLOCK_SKEW``): a time
    # that leaves the calendar there is refused here, not an OverflowError in a turn
    try:
        if moment.astimezone(timezone.utc) <= _LATEST:
            return moment
    except OverflowError:
        pass
    raise ValueError(
        f"{what}={str(given)!r} is outside the times memory can reckon with (in UTC, "
        "0001-01-01 to a day before the end of 9999)"
    )


def _days(now: datetime, first: date, last: date) -> TimeRef:
    """The days ``first`` to ``last`` (inclusive) in ``now``'s zone, as a window."""
    zone = now.tzinfo
    start = datetime.combine(first, time.min, tzinfo=zone)
    end = datetime.combine(last + timedelta(days=1), time.min, tzinfo=zone)
    return TimeRef(iso(start), iso(end))


def _month(now: datetime, year: int, month: int) -> TimeRef:
    first = date(year, month, 1)
    after = date(year + month // 12, month % 12 + 1, 1)
    return _days(now, first, after - timedelta(days=1))


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS.get(text, 1)


def _relative_days(now: datetime, text: str) -> TimeRef | None:
    today = now.date()
    if re.search(r"\bthe day before yesterday\b", text):
        return _days(now, today - timedelta(days=2), today - timedelta(days=2))
    if re.search(r"\byesterday\b", text):
        return _days(now, today - timedelta(days=1), today - timedelta(days=1))
    if re.search(r"\b(?:earlier )?today\b|\bthis morning\b", text):
        return _days(now, today, today)
    if m := re.search(rf"\b{_COUNT} days? ago\b", text):
        n = _count(m.group("n"))
        return _days(now, today - timedelta(days=n + 1), today - timedelta(days=max(n - 1, 0)))
    if re.search(r"\bthe other day\b|\brecently\b|\ba few days ago\b", text):
        return _days(now, today - timedelta(days=10), today)
    return None


def _relative_weeks(now: datetime, text: str) -> TimeRef | None:
    today = now.date()
    monday = today - timedelta(days=today.weekday())
    if re.search(r"\blast week\b|\bprevious week\b|\ba week ago\b", text):
        return _days(now, monday - timedelta(days=7), today - timedelta(days=1))
    if re.search(r"\bthis week\b", text):
        return _days(now, monday, today)
    if m := re.search(rf"\b{_COUNT} weeks? ago\b", text):
        n = _count(m.group("n"))
        centre = today - timedelta(days=7 * n)
        return _days(now, centre - timedelta(days=4), centre + timedelta(days=3))
    for m in re.finditer(rf"\b(?P<said>last |this past )?{_WEEKDAY}\b", text):
        if not m.group("said") and (
            _SCHEDULE.search(text, 0, m.start()) or not _asks_about_the_past(text)
        ):
            continue  # "When is my Friday standup?", "What's due Friday?": not a past day
        back = (today.weekday() - _WEEKDAYS[m.group("weekday")]) % 7 or 7
        day = today - timedelta(days=back)
        return _days(now, day, day)
    return None


#: A weekday named without "last" points back only in a question about the past ("What did
#: I say on Friday?", "How was my Sunday?", "Who brought cake on Tuesday?"); in one about
#: now or later it names a schedule or a meeting ("When is my Friday standup?", "What is
#: scheduled for Friday?", "What's due Friday?"). The question's first auxiliary tells which;
#: without one, a verb in the past does.
_AUXILIARY = re.compile(
    r"\b(?:did|didn['’]t|was|wasn['’]t|were|weren['’]t|had|have|has|haven['’]t|hasn['’]t"
    r"|is|isn['’]t|are|aren['’]t|am|will|won['’]t|can|do|does|don['’]t|should|shall)\b"
    r"|\b(?:what|who|where|when|how|that|there|it|he|she)['’]s\b|['’](?:re|ll|m)\b"
)
_PAST_AUXILIARIES = frozenset(
    {"did", "didn't", "didn’t", "was", "wasn't", "wasn’t", "were", "weren't", "weren’t", "had",
     "have", "has", "haven't", "haven’t", "hasn't", "hasn’t"}
)  # fmt: skip
_PAST = re.compile(
    r"\b(?:said|told|talked|spoke|asked|went|got|came|ate|bought|brought|sent|wrote|met|saw"
    r"|made|paid|spent|took|left|forgot|heard|thought|felt|won|lost|ran|drove|sang|gave|found"
    r"|[a-z]{3,}ed)\b"
)


def _asks_about_the_past(text: str) -> bool:
    first = _AUXILIARY.search(text)
    if first is not None:
        return first.group(0) in _PAST_AUXILIARIES
    return _PAST.search(text) is not None


#: A word before it that makes it a schedule whatever the tense ("every Monday", "next
#: Tuesday", "most Fridays").
_SCHEDULE = re.compile(r"\b(?:every|each|next|most|some)\s+$")


# Parts of a month: (first day, last day; 0 = the month's last day).
_PARTS = [
    (r"(?:the )?(?:start|beginning) of|early", (1, 10)),
    (r"mid-?|(?:the )?middle of", (10, 20)),
    (r"(?:the )?end of|late", (20, 0)),
    (r"(?:the )?first half of", (1, 15)),
    (r"(?:the )?second half of", (16, 0)),
    (r"(?:the )?first week of", (1, 7)),
    (r"(?:the )?second week of", (8, 14)),
    (r"(?:the )?third week of", (15, 21)),
    (r"(?:the )?last week of", (-7, 0)),
]


#: A year written after a month or a day ("March 2024", "March 10, 2024", "10 March 2024").
_YEAR_AFTER = re.compile(r",? (?P<year>\d{4})\b")


def _year(now: datetime, named: re.Match[str], month: int, day: int = 1) -> int:
    """The year of the month (or the day) ``named`` ends with: the one written right after
    it, else the latest not after ``now``."""
    if written := _YEAR_AFTER.match(named.string, named.end()):
        return int(written.group("year"))  # year 0 leaves the calendar: no window
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _month_part(now: datetime, text: str) -> TimeRef | None:
    """ "early March", "mid-January", "the end of May", "the last week of November"."""
    for words, (first, last) in _PARTS:
        if m := re.search(rf"\b(?:{words}) ?{_MONTH}\b", text):
            month = _MONTHS[m.group("month")]
            year = _year(now, m, month)
            length = (date(year + month // 12, month % 12 + 1, 1) - date(year, month, 1)).days
            start = first if first > 0 else length + first + 1
            return _days(now, date(year, month, start), date(year, month, last or length))
    return None


def _months(now: datetime, text: str) -> TimeRef | None:
    today = now.date()
    if re.search(r"\blast month\b|\bprevious month\b|\ba month ago\b", text):
        year, month = (today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12)
        return _month(now, year, month)
    if re.search(r"\bthis month\b", text):
        return _month(now, today.year, today.month)
    if m := re.search(rf"\b{_COUNT} months? ago\b", text):  # give or take half a month
        centre = today - timedelta(days=round(30.4 * _count(m.group("n"))))
        return _days(now, centre - timedelta(days=15), centre + timedelta(days=15))
    if m := re.search(rf"\b(?:in |during |back in |last ){_MONTH}\b", text):
        month = _MONTHS[m.group("month")]
        year = _year(now, m, month)
        if m.group(0).startswith("last ") and (year, month) == (today.year, today.month):
            year -= 1  # "last November", asked in November: the one before
        return _month(now, year, month)
    if re.search(r"\blast year\b", text):
        return _days(now, date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))
    if m := re.search(r"\b(?:in|during|back in|throughout|in the year) (?P<year>\d{4})\b", text):
        year = int(m.group("year"))  # year 0 leaves the calendar: no window (``time_ref``)
        return _days(now, date(year, 1, 1), date(year, 12, 31))
    return None


#: How a question asks about the present state of something that may have changed.
_PRESENT = re.compile(
    r"\b(?:now|nowadays|these days|currently|current|presently|still|anymore|any more|"
    r"any longer|no longer|at the moment|at present|at this point|latest|most recent|"
    r"by now|so far)\b"
)


def _sessions(text: str) -> TimeRef | None:
    if re.search(
        r"\b(?:last|previous) (?:time|session|conversation|chat)\b|\blast time we (?:talked|spoke)\b",
        text,
    ):
        return TimeRef(sessions_back=1)
    if m := re.search(rf"\b{_COUNT} (?:sessions|conversations|chats) ago\b", text):
        return TimeRef(sessions_back=_count(m.group("n")))
    return None


def _dated(now: datetime, text: str) -> TimeRef | None:
    if m := re.search(r"\b(\d{4})-(\d{2})-(\d{2})\b", text):
        try:
            day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return None
        return _days(now, day, day)
    m = re.search(rf"\b{_MONTH} (?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b", text) or re.search(
        rf"\b(?P<d>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH}\b", text
    )
    if m:
        month, day_of_month = _MONTHS[m.group("month")], int(m.group("d"))
        year = _year(now, m, month, day_of_month)
        try:
            day = date(year, month, day_of_month)
        except ValueError:
            return None
        return _days(now, day, day)
    return None


def time_ref(question: str, now: datetime) -> TimeRef | None:
    """The time ``question`` points to, relative to ``now``; None when it names none."""
    text = " ".join(question.lower().split())
    # the narrowest reading first: "that Monday at the start of February" is early February
    for read in (_dated, _month_part, _relative_days, _months, _relative_weeks):
        try:
            found = read(now, text)
        except (OverflowError, ValueError):
            # a window past the calendar's ends ("yesterday" asked at 0001-01-01): none,
            # not an error outside memory's handling that fails the turn
            continue
        if found is not None:
            return found
    return _sessions(text) or (TimeRef(present=True) if _PRESENT.search(text) else None)


def dated_line(text: str, at: str, title: str = "", zone: tzinfo | None = None) -> str:
    """One recalled conversation memory as the prompt shows it: its day (with the weekday,
    in ``zone``: the one "today" is reckoned in), the conversation's title where there is
    one, then what was said."""
    day = _day(at, zone)
    # a title cut from the first question (no model titled it) would repeat the text
    shown = title.rstrip("…").strip()
    where = f', "{title}"' if shown and shown not in text else ""
    return f"[{day}{where}] {text}" if day else text


def _day(at: str, zone: tzinfo | None = None) -> str:
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        return ""
    if zone is not None and moment.tzinfo is not None:
        # said on the calendar's first day, asked west of UTC: no local form, its own kept
        with contextlib.suppress(OverflowError):
            moment = moment.astimezone(zone)
    return f"{moment.year:04d}-{moment:%m-%d (%a)}"  # "%Y" drops a year's leading zeros
