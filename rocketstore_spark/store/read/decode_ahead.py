"""Batches decoded ahead of their consumer, on worker threads.

The native kernels release the GIL while they decode, so a scan that hands each batch's decode to a thread pool
decodes the next batches while its consumer works on the current one, on as many cores as it is given. Batches
come out in the order of their jobs; a job's exception is raised where its batch would have been yielded; jobs
not yet started when the consumer stops are cancelled (the running ones finish first).
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, Optional, TypeVar

T = TypeVar("T")

#: The most decode threads a scan uses by default (each holds a batch in decoding).
MAX_DEFAULT_THREADS = 4


def default_threads() -> int:
    """Decode threads for a scan that does not say: the cores this process may run on, at most
    :data:`MAX_DEFAULT_THREADS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_THREADS, cores))


def in_order(jobs: Iterable[Callable[[], T]], threads: Optional[int] = None) -> Iterator[T]:
    """The results of ``jobs`` in their order, up to ``threads`` of them computed at once (None: the default;
    1: each when it is asked for, on the caller's thread)."""
    threads = default_threads() if threads is None else threads
    if threads < 1:
        from ...errors import InvalidArgumentError

        raise InvalidArgumentError(f"threads must be at least 1, found {threads}")
    if threads == 1:
        for job in jobs:
            yield job()
        return
    pending: deque = deque()
    with ThreadPoolExecutor(threads, thread_name_prefix="rocketstore-decode") as pool:
        try:
            for job in jobs:
                pending.append(pool.submit(job))
                if len(pending) >= threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
