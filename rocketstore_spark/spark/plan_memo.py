"""The partitions a planner worked out for a store that did not change since: planned once, handed out again.

Spark plans every action of a DataFrame again, and a planner keeps the store it recovered while its files stay as
they were (:func:`.planning.open_store`, :mod:`.store_cache`). Planning that store again with the same options and
pushed filters gives the same partitions: every queue's bounds, and for a tag filter every unit's tag hash read
again (20,000 queues: a third of a second before the first task starts, and a selective read's largest cost). So
the planner keeps the partitions of its last plans with the store object they came from, and hands them out again
while the cache still holds that very object for the store; a store that changed was opened again, is another
object, and is planned anew. Plans that reported lost messages are not kept (each plan reports them).

A commit-log-ordered plan of a store of thousands of queues names them in every partition (about 150 KB pickled
per partition at 20,000 queues, several times that in memory): the memo holds at most :data:`BUDGET_BYTES` of
plans, weighed by their pickled size (what Spark sends of them anyway), the least recently used going first.
"""

from __future__ import annotations

import pickle
import weakref
from collections import OrderedDict
from dataclasses import fields
from typing import Hashable, Optional

from ..store import RocketStore
from .options import ReadOptions, StoreRef
from .planning_types import Pushed

CAPACITY = 64  # plans kept in one planning worker
BUDGET_BYTES = 8 << 20  # their pickled partitions, together


def memo_key(ref: StoreRef, opts: ReadOptions, pushed: Pushed) -> Hashable:
    """What a store's plan depends on besides the store: the store reference, every read option and every
    pushed restriction (sets in a canonical order; the pushed filters' notes, which only explain, left out)."""
    restrictions = tuple((f.name, _canonical(getattr(pushed, f.name))) for f in fields(pushed) if f.name != "notes")
    return ref, repr(opts), restrictions


def _canonical(value):
    return tuple(sorted(value, key=repr)) if isinstance(value, (set, frozenset)) else value


class PlanMemo:
    """Partitions by :func:`memo_key`, each with the store object they were planned from (least recently used
    first, at most :data:`CAPACITY` plans and :data:`BUDGET_BYTES` of them pickled)."""

    def __init__(self, capacity: int = CAPACITY, budget_bytes: int = BUDGET_BYTES):
        self.capacity = capacity
        self.budget_bytes = budget_bytes
        self._entries: "OrderedDict[Hashable, tuple]" = OrderedDict()  # key → (weak store, partitions, weight)
        self._held = 0  # the weights of the entries, summed

    def get(self, key: Hashable, store: RocketStore) -> Optional[list]:
        """The partitions planned under ``key`` from ``store`` itself (a copy of the list), else None."""
        entry = self._entries.get(key)
        if entry is None or entry[0]() is not store:
            return None
        self._entries.move_to_end(key)
        return list(entry[1])

    def put(self, key: Hashable, store: RocketStore, partitions: list) -> None:
        """Keep ``partitions`` (planned from ``store``) under ``key``, unless they alone weigh more than the
        budget; the least recently used plans go past the capacity or the budget."""
        self._drop(key)
        weight = len(pickle.dumps(partitions, protocol=pickle.HIGHEST_PROTOCOL))
        if weight > self.budget_bytes:
            return
        self._entries[key] = (weakref.ref(store), list(partitions), weight)
        self._held += weight
        while len(self._entries) > self.capacity or self._held > self.budget_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._held -= entry[2]

    def clear(self) -> None:
        self._entries.clear()
        self._held = 0

    def __len__(self) -> int:
        return len(self._entries)


PLANS = PlanMemo()  # the planning worker's one memo


__all__ = ["BUDGET_BYTES", "CAPACITY", "PLANS", "PlanMemo", "memo_key"]
