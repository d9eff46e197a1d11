"""One definition per option: name, type, default, validation and documentation.

The read options (:data:`.options.READ_SPEC`) and the write options (:data:`.write_options.WRITE_SPEC`) are lists
of :class:`OptionSpec`. The same definitions drive the validation of ``load()`` / ``save()`` (unknown names,
types, ranges, choices), the CLI flags that mirror an option (``cli``), and the option tables of the
documentation (:func:`markdown_table`, rendered into ``docs/options.md`` when the site is built). Nothing here
imports pyspark or the store.
"""

from __future__ import annotations

import datetime as dt
import difflib
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from ..errors import InvalidArgumentError

BOOLEAN, INTEGER, STRING, CHOICE, OFFSETS, TIMESTAMP, PATH = (
    "boolean", "integer", "string", "choice", "offsets", "timestamp", "path")
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes"), ("false", "0", "no")


@dataclass(frozen=True)
class OptionSpec:
    """One option of the data source or sink.

    ``default`` is the value used when the option is absent (None: none), ``shown_default`` what the
    documentation says instead when the default is not a plain value ("all non-system topics"). ``scopes`` says
    where the option applies: ``read`` (batch), ``stream`` (readStream), ``write``. ``cli`` names the flags of the
    ``rocketstore`` commands that mirror the option.
    """

    name: str
    type: str
    doc: str
    default: object = None
    shown_default: Optional[str] = None
    minimum: Optional[int] = None
    choices: tuple = ()
    scopes: tuple = ("read", "stream")
    cli: tuple = ()

    @property
    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None:
            return "—"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        return f"`{self.default}`"

    @property
    def type_text(self) -> str:
        if self.type == CHOICE:
            return " \\| ".join(f"`{c}`" for c in self.choices)
        if self.type == INTEGER and self.minimum is not None:
            return f"integer ≥ {self.minimum}"
        return self.type

    def parse(self, value):
        """The option's value checked against its type, range and choices (``value`` None: the default)."""
        if value is None:
            return self.default
        if self.type == BOOLEAN:
            text = str(value).strip().lower()
            if text in TRUE_WORDS:
                return True
            if text in FALSE_WORDS:
                return False
            raise InvalidArgumentError(f"option {self.name} must be true or false, found {value!r}")
        if self.type == INTEGER:
            try:
                number = int(str(value).strip())
            except ValueError as e:
                raise InvalidArgumentError(f"option {self.name} must be an integer, found {value!r}") from e
            if self.minimum is not None and number < self.minimum:
                raise InvalidArgumentError(f"option {self.name} must be >= {self.minimum}, found {number}")
            return number
        if self.type == CHOICE:
            by_lower = {c.lower(): c for c in self.choices}
            choice = by_lower.get(str(value).strip().lower())
            if choice is None:
                raise InvalidArgumentError(f"option {self.name} must be one of {', '.join(self.choices)}, found "
                                           f"{value!r}{did_you_mean(str(value), self.choices)}")
            return choice
        if self.type == TIMESTAMP:
            return parse_timestamp(self.name, value)
        return value


def did_you_mean(given: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` (case-insensitive), or an empty string."""
    known = list(known)
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(given.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def parse_timestamp(name: str, value) -> int:
    """Epoch milliseconds from digits or an ISO 8601 time (``2024-06-01T00:00:00Z``; UTC when no zone is
    given)."""
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        number = int(text)
        if number < 0:
            raise InvalidArgumentError(f"option {name} must be epoch milliseconds >= 0, found {number}")
        return number
    try:
        moment = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError as e:
        raise InvalidArgumentError(f"option {name} must be epoch milliseconds or an ISO 8601 time such as "
                                   f"2024-06-01T00:00:00Z, found {value!r}") from e
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp() * 1000)


def canonical_names(options: Mapping[str, str], specs: Iterable[OptionSpec], passthrough_prefix: str = "",
                    what: str = "rocketstore") -> dict:
    """Map the given (possibly lower-cased: Spark lower-cases them) option names to their documented spelling.
    An unknown name is an error naming the closest known one; names with ``passthrough_prefix`` pass as given."""
    names = [s.name for s in specs]
    by_lower = {n.lower(): n for n in names}
    out = {}
    for key, value in options.items():
        if passthrough_prefix and key.lower().startswith(passthrough_prefix):
            out[key] = value
            continue
        name = by_lower.get(key.lower())
        if name is None:
            hint = did_you_mean(key, names)
            known = "docs/options.md lists them" if hint else f"the options are {', '.join(sorted(names))}"
            raise InvalidArgumentError(f"unknown option {key!r} for {what}{hint}; {known}")
        out[name] = value
    return out


def markdown_table(specs: Iterable[OptionSpec], scope: str) -> str:
    """The documentation's table of the options of ``scope`` (read, stream or write)."""
    lines = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for s in specs:
        if scope in s.scopes:
            doc = s.doc.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{s.name}` | {s.type_text} | {s.default_text} | {doc} |")
    return "\n".join(lines)


def check_selection(opts, ref, topics: list, queue_ids) -> None:
    """For a read (:class:`~.options.ReadOptions`) of the store ``ref``: topics named in option ``topics`` and
    topics and queues named in JSON offsets must exist in the store (``topics`` its topics, ``queue_ids(topic)``
    a topic's queue ids): a typo is an error listing what exists, never an empty or unbounded read."""
    known = set(topics)
    for name in opts.topics if len(opts.stores) == 1 and opts.topics else ():  # several brokers: topics may differ
        if name not in known:
            raise InvalidArgumentError(f"option topics: {ref.broker} has no topic {name!r}"
                                       f"{did_you_mean(name, topics)}; its topics are {listing(topics)}")
    named = (("startingOffsets", opts.starting_offsets), ("endingOffsets", opts.ending_offsets),
             ("startingOffsetsByTimestamp", opts.starting_timestamps),
             ("endingOffsetsByTimestamp", opts.ending_timestamps))
    for option_name, spec in named:
        if not isinstance(spec, dict) or (option_name == "startingOffsets" and opts.starting_group):
            continue  # a group's committed offsets may name queues the store no longer has: they are skipped
        node = spec.get(ref.broker, {}) if len(opts.stores) > 1 else spec
        for topic, queues in node.items():
            if topic not in known:
                raise InvalidArgumentError(f"option {option_name}: {ref.broker} has no topic {topic!r}"
                                           f"{did_you_mean(topic, topics)}; its topics are {listing(topics)}")
            ids = list(queue_ids(topic))
            missing = sorted(int(q) for q in queues if int(q) not in ids)
            if missing:
                raise InvalidArgumentError(f"option {option_name}: topic {topic!r} of {ref.broker} has no queue "
                                           f"{missing[0]}; its queues are {listing(ids)}")
    if len(opts.stores) > 1:
        for option_name, spec in named:
            brokers = [s.broker for s in opts.stores]
            unknown = [b for b in spec if b not in brokers] if isinstance(spec, dict) else []
            if unknown:
                raise InvalidArgumentError(f"option {option_name}: no store has broker name {unknown[0]!r}"
                                           f"{did_you_mean(unknown[0], brokers)}; the brokers are {listing(brokers)}")


def listing(names, limit: int = 20) -> str:
    """At most ``limit`` names, comma-separated, with the number left out."""
    names = [str(n) for n in names]
    if not names:
        return "none"
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" … ({more} more)" if more > 0 else "")
