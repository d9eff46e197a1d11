"""The opened stores of a Python worker, shared by planning, batch reads and streams.

Spark reuses its Python workers: a planner keeps the recovered store between plans, an executor keeps the store
its tasks read (maps stay warm). Both go through one cache with a capacity: at most :data:`CAPACITY` stores stay
open, the least recently used is closed. Each entry carries the stamp its user took when opening it, and whoever
asks for a store says whether the entry still holds (``still_good(stamp, store)``): a store that changed is
closed and opened again by the caller.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Optional

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


__all__ = ["OpenStores", "OPEN_STORES", "CAPACITY"]
