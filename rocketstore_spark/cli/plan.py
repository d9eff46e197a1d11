"""``rocketstore plan``: what a Spark read of a store would plan, and why, without starting Spark.

Spark plans a Python data source in one of its Python workers, where a user's logging configuration does not
reach, so the planner's choice (consume queues or commit log, see the ``scanMode`` option) is invisible from a
job. This command runs the same planner on the same options in this process and prints its choice, its reason
and the partitions.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..errors import InvalidArgumentError
from .common import STORE_HELP, console, mirror

SHOWN_PARTITIONS = 20


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def describe(partition) -> dict:
    """One partition as its kind and its fields (the store handle left out), whatever its class."""
    kind = type(partition).__name__.removesuffix("Partition")
    fields = {f.name: getattr(partition, f.name) for f in dataclasses.fields(partition) if f.name != "store"} \
        if dataclasses.is_dataclass(partition) else {}
    broker = getattr(getattr(partition, "store", None), "broker", "")
    return {"broker": broker, "kind": kind, **{k: _short(v) for k, v in fields.items()}}


def _short(value, limit: int = 6):
    if isinstance(value, (tuple, list)) and len(value) > limit:
        return [_short(v) for v in value[:limit]] + [f"… {len(value) - limit} more"]
    if isinstance(value, (tuple, list)):
        return [_short(v) for v in value]
    return value


def plan_command(store: Path = typer.Argument(..., metavar="STORE", help=STORE_HELP),
                 topics: Optional[str] = mirror("topics"), tags: Optional[str] = mirror("tags"),
                 since: Optional[str] = mirror("startingTimestamp"), until: Optional[str] = mirror("endingTimestamp"),
                 scan_mode: Optional[str] = mirror("scanMode"),
                 option: Optional[list[str]] = typer.Option(None, "--option", "-o", help="any other read option as "
                                                            "name=value (repeatable), e.g. -o maxBytesPerPartition="
                                                            "67108864"),
                 as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """What a Spark read of STORE with these options would plan: the plan chosen, why, and the partitions."""
    try:
        from ..spark.options import parse_read_options
        from ..spark.planning import plan
        from ..spark.planning_types import Pushed
    except ImportError as e:
        raise InvalidArgumentError(f"rocketstore plan runs Spark's planner and needs PySpark ({e}); install it with "
                                   "pip install 'rocketstore-spark[spark]'") from e
    options = {"path": str(store)}
    for item in option or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected name=value, found {item!r}", param_hint="--option")
        options[name.strip()] = value.strip()
    given = {"topics": topics, "tags": tags, "startingTimestamp": since, "endingTimestamp": until,
             "scanMode": scan_mode}
    options.update({k: v for k, v in given.items() if v is not None})
    opts = parse_read_options(options)
    collect = _Collect()
    logger = logging.getLogger("rocketstore_spark")
    level = logger.level
    logger.addHandler(collect)
    logger.setLevel(logging.INFO)
    try:
        parts = plan(opts, Pushed())
    finally:
        logger.removeHandler(collect)
        logger.setLevel(level)
    described = [describe(p) for p in parts]
    if as_json:
        console.print_json(json.dumps({"choices": collect.lines, "partitions": described}, default=str))
        return
    for line in collect.lines or ["nothing to plan: no selected queue has messages in range"]:
        console.print(line, markup=False, highlight=False)
    table = Table("#", "broker", "kind", "what")
    for i, d in enumerate(described[:SHOWN_PARTITIONS]):
        what = ", ".join(f"{k}={v}" for k, v in d.items() if k not in ("broker", "kind"))
        table.add_row(str(i), d["broker"], d["kind"], what)
    console.print(table)
    more = len(described) - SHOWN_PARTITIONS
    console.print(f"{len(described)} partition(s)" + (f" ({more} not shown; --json lists them all)" if more > 0
                                                      else ""))
