"""The opened stores of a Python worker, shared by planning, batch reads and streams.

Spark reuses its Python workers: a planner keeps the recovered store between plans, an executor keeps the store
its tasks read (maps stay warm), a stream keeps the store it follows between the calls of a trigger. All go
through one cache with a capacity (at most :data:`CAPACITY` stores stay open, the least recently used is closed)
and one rule, :func:`open_cached`: a cached store is used again only when

1. it was opened the same way: the same key (which store, for which use) and the same options;
2. it is unchanged: the stamp taken when it was opened (:mod:`.store_snapshot`) says nothing it depends on
   changed (planners and streams: a local store's file metadata; planners: a remote store's listing, while a
   stream's remote store never counts as unchanged; executors, pinned to their plan's ends: the oldest
   commit-log file is still there);
3. it serves what is asked (an executor's planned queue ranges).

Otherwise it is closed and the store is opened again (and stamped) in its place.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Hashable, Optional, Protocol

from ..store import RocketStore

CAPACITY = 16  # stores whose maps stay open in one Python worker


class OpenStores:
    """Opened stores by key, least recently used first; closing an entry closes its store."""

    def __init__(self, capacity: int = CAPACITY):
        self.capacity = capacity
        self._entries: "OrderedDict[Hashable, tuple]" = OrderedDict()  # key → (stamp, store)

    def get(self, key: Hashable, still_good: Callable[[object, RocketStore], bool]) -> Optional[RocketStore]:
        """The store cached under ``key`` if ``still_good`` accepts it, else None (a rejected one is closed)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if not still_good(*entry):
            self.drop(key)
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: Hashable, store: RocketStore, stamp=None) -> RocketStore:
        """Cache ``store`` (replacing and closing what ``key`` held), closing the least recently used stores
        past the capacity; returns ``store``."""
        self.drop(key)
        self._entries[key] = (stamp, store)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)[1][1].close()
        return store

    def peek(self, key: Hashable) -> Optional[RocketStore]:
        """The store cached under ``key`` (None when absent), without checking it or touching its place."""
        entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry[1].close()

    def clear(self) -> None:
        for key in list(self._entries):
            self.drop(key)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries


OPEN_STORES = OpenStores()  # the worker's one cache


class Stamp(Protocol):
    """What a user took when it opened a store, answering whether the store changed since (:mod:`.store_snapshot`)."""

    def unchanged(self) -> bool: ...


def open_cached(key: Hashable, options, open_store: Callable[[], RocketStore],
                stamp: Callable[[RocketStore, int], Stamp], serves: Optional[Callable[[RocketStore], bool]] = None,
                cache: Optional[OpenStores] = None) -> RocketStore:
    """The store cached under ``key`` when the module's rule holds for it (opened with ``options``, its stamp
    ``unchanged()``, ``serves(store)`` when given), else ``open_store()``, cached with
    ``stamp(store, opened_at_ns)`` (``opened_at_ns``: ``time.time_ns()`` just before the open) in its place."""
    cache = OPEN_STORES if cache is None else cache

    def still_good(held, store: RocketStore) -> bool:
        held_options, held_stamp = held
        return held_options == options and held_stamp.unchanged() and (serves is None or serves(store))

    store = cache.get(key, still_good)
    if store is not None:
        return store
    opened_at = time.time_ns()
    store = open_store()
    try:
        taken = stamp(store, opened_at)
    except BaseException:
        store.close()
        raise
    return cache.put(key, store, (options, taken))


__all__ = ["OpenStores", "OPEN_STORES", "CAPACITY", "Stamp", "open_cached"]
