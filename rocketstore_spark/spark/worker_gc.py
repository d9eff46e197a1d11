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

The driver-side workers of a query (the one that creates the source, the planner, which keeps the stores it
planned) are collected after every call too, while the query's tasks run on the same cores: the source's
constructor and the planner settle them as well (:func:`settle_in_worker`), which only ever acts inside Spark's
workers. On a 2,110-queue store those two collections took about a tenth of a full scan's CPU.
"""

from __future__ import annotations

import gc
import sys
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


def in_spark_worker() -> bool:
    """Whether this process is one of Spark's Python workers (started as ``python -m pyspark.daemon`` or
    ``pyspark.worker``), not a user's driver, notebook or test process, whose collector is not ours to change."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and (spec.name or "").startswith("pyspark.")


def settle_in_worker(holder=WORKER) -> bool:
    """:func:`settle` in Spark's Python workers only (the driver-side ones too: creating the source and planning
    its partitions, after which the daemon collects as after any task); elsewhere nothing (False)."""
    return in_spark_worker() and settle(holder)


__all__ = ["RECLAIM_EVERY", "WORKER", "in_spark_worker", "settle", "settle_in_worker"]
