"""The cycle collector of an executor's Python worker, kept off its long-lived objects.

Spark's worker daemon runs a full ``gc.collect()`` after every task a reused Python worker finishes, and a full
collection visits every tracked object in the process: PySpark's, pyarrow's and numpy's modules and an opened
store's maps are some 50,000 objects, 50-100 ms a collection on a small VM, paid between every two tasks and
again whenever allocations trigger one (a full scan of 2 GB in 8 tasks spent a tenth of its CPU there).

:func:`settle` moves what the worker holds for good into the collector's permanent generation
(``gc.freeze()``) once a store has been opened into the worker's cache, so that later collections only visit what
tasks allocate. Frozen objects are still freed when their last reference goes; only reference cycles among them
wait. So the first store a worker settles, and every :data:`RECLAIM_EVERY`-th after it, first returns everything
frozen to the collector (``gc.unfreeze()``) and collects: stores the cache closed since are reclaimed then. The
stores in between (a stream's executor opens the store again when it grew, once a trigger) are only frozen, which
costs next to nothing, rather than a full collection in the trigger's latency each time.
"""

from __future__ import annotations

import gc
import weakref

#: Newly settled holders between two full collections (the first one always collects).
RECLAIM_EVERY = 8

_settled: "weakref.WeakSet" = weakref.WeakSet()  # the holders settled before the last freeze
_frozen_since_reclaim = RECLAIM_EVERY  # holders frozen since the last full collection


class _Worker:
    """What every task of a worker shares for good: its modules and their objects."""


#: The holder a task settles when it keeps nothing of its own between tasks (a writer's).
WORKER = _Worker()


def settle(holder=WORKER) -> bool:
    """Freeze the worker's long-lived objects if ``holder`` (an opened store the worker keeps, or
    :data:`WORKER`) is new to it, after a full collection of everything frozen before when it is the first or
    the :data:`RECLAIM_EVERY`-th since the last one; returns whether it froze (False: ``holder`` was settled
    already, nothing done)."""
    global _frozen_since_reclaim
    if holder in _settled:
        return False
    if _frozen_since_reclaim >= RECLAIM_EVERY:
        gc.unfreeze()
        gc.collect()
        _frozen_since_reclaim = 0
    gc.freeze()
    _frozen_since_reclaim += 1
    _settled.add(holder)
    _settled.add(WORKER)  # a store's settle also settled the modules
    return True


__all__ = ["RECLAIM_EVERY", "WORKER", "settle"]
