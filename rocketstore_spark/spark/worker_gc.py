"""The cycle collector of an executor's Python worker, kept off its long-lived objects.

Spark's worker daemon runs a full ``gc.collect()`` after every task a reused Python worker finishes, and a full
collection visits every tracked object in the process: PySpark's, pyarrow's and numpy's modules and an opened
store's maps are some 50,000 objects, 50-100 ms a collection on a small VM, paid between every two tasks and
again whenever allocations trigger one (a full scan of 2 GB in 8 tasks spent a tenth of its CPU there).

:func:`settle` moves what the worker holds for good into the collector's permanent generation
(``gc.freeze()``) once a store has been opened into the worker's cache, after one full collection, so that later
collections only visit what tasks allocate. Frozen objects are still freed when their last reference goes;
only reference cycles among them would wait, so each newly opened store first returns everything frozen to the
collector (``gc.unfreeze()``) and collects: a store the cache closed since is reclaimed then.
"""

from __future__ import annotations

import gc
import weakref

_settled: "weakref.WeakSet" = weakref.WeakSet()  # the holders settled before the last freeze


class _Worker:
    """What every task of a worker shares for good: its modules and their objects."""


#: The holder a task settles when it keeps nothing of its own between tasks (a writer's).
WORKER = _Worker()


def settle(holder=WORKER) -> bool:
    """Freeze the worker's long-lived objects if ``holder`` (an opened store the worker keeps, or
    :data:`WORKER`) is new since the last freeze; returns whether it collected and froze (False: ``holder`` was
    settled already, nothing done)."""
    if holder in _settled:
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _settled.add(holder)
    _settled.add(WORKER)  # a store's settle also settled the modules
    return True


__all__ = ["WORKER", "settle"]
