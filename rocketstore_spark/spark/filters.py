"""Translating Spark's pushed-down filters (Spark >= 4.1) into read restrictions.

Handled exactly (not returned to Spark): ``topic``, ``queueId`` and ``tags`` equality / IN, ``queueOffset`` and
``commitLogOffset`` ranges. Used to narrow the read but also returned, so Spark re-checks them: ``storeTimestamp``
ranges (consume-queue binary search), ``uniqKey =`` / ``msgId =`` (index and offset lookups).
"""

from __future__ import annotations

import datetime as dt
from typing import Iterable, Iterator

from .planning import Pushed

try:  # Spark 4.0 has no filter classes at all
    from pyspark.sql.datasource import EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
except ImportError:  # pragma: no cover - exercised on Spark 4.0 only
    Filter = EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = None

#: Whether this Spark can push filters into Python data sources at all (4.1+; 4.0 filters after the scan).
PUSHDOWN_SUPPORTED = Filter is not None

EXACT_SETS = {"topic": "topics", "queueId": "queue_ids", "tags": "tags"}
RANGES = {"queueOffset": "queue_offset", "commitLogOffset": "phy_offset"}
HINT_SETS = {"uniqKey": "uniq_keys", "msgId": "msg_ids"}


def _column(f) -> str | None:
    attr = getattr(f, "attribute", None)
    return attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None


def _ms(value) -> int | None:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)):
        return int(value)
    return None


def _intersect(current, values):
    values = set(values)
    return values if current is None else current & values


def apply_filters(filters: Iterable, pushed: Pushed) -> Iterator:
    """Record what each filter restricts in ``pushed``; yield the filters Spark must still apply."""
    for f in filters:
        col = _column(f)
        if col in EXACT_SETS or col in HINT_SETS:
            if isinstance(f, EqualTo):
                values = [f.value]
            elif isinstance(f, In):
                values = list(f.value)
            else:
                yield f
                continue
            if col == "queueId":
                values = [int(v) for v in values if isinstance(v, int)]
            else:
                values = [v for v in values if isinstance(v, str)]
            name = EXACT_SETS.get(col) or HINT_SETS[col]
            setattr(pushed, name, _intersect(getattr(pushed, name), values))
            if not getattr(pushed, name):
                pushed.empty = True
            if col in HINT_SETS:
                yield f
            continue
        if col in RANGES and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)) \
                and isinstance(f.value, int):
            name = RANGES[col]
            lo, hi = getattr(pushed, name)
            v = f.value
            if isinstance(f, EqualTo):
                lo, hi = max(lo, v), min(hi, v + 1)
            elif isinstance(f, GreaterThan):
                lo = max(lo, v + 1)
            elif isinstance(f, GreaterThanOrEqual):
                lo = max(lo, v)
            elif isinstance(f, LessThan):
                hi = min(hi, v)
            else:
                hi = min(hi, v + 1)
            setattr(pushed, name, (lo, hi))
            if lo >= hi:
                pushed.empty = True
            continue
        if col == "storeTimestamp" and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan,
                                                      LessThanOrEqual)):
            ms = _ms(f.value)
            if ms is not None:
                lo, hi = pushed.store_time
                if isinstance(f, (GreaterThan, GreaterThanOrEqual, EqualTo)):
                    lo = ms if lo is None else max(lo, ms)
                if isinstance(f, (LessThan, LessThanOrEqual, EqualTo)):
                    bound = ms + 1  # ms precision: '<= t' and '< t' both read up to t inclusive, Spark rechecks
                    hi = bound if hi is None else min(hi, bound)
                pushed.store_time = (lo, hi)
        yield f
