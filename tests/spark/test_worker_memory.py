"""The allocator thresholds of Spark's Python workers (worker_memory), counted in page faults: a tuned process
reuses the memory of freed large arrays, an untuned one maps (and faults in) fresh memory for each."""

import subprocess
import sys
import textwrap

from rocketstore_spark.spark.worker_memory import tune_allocator_in_worker

FAULTS = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from rocketstore_spark.spark.worker_memory import tune_allocator
    tuned = tune_allocator() if sys.argv[1] == "tuned" else False
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for size in (40, 48, 44):  # warm the heap up to the largest
        np.ones(size << 20, dtype=np.uint8).sum()
    before = faults()
    for _ in range(10):  # arrays above glibc's highest dynamic mmap threshold (32 MiB), each touched whole
        for size in (40, 48, 44):
            np.ones(size << 20, dtype=np.uint8).sum()
    print(tuned, faults() - before)
""")


def faults(mode: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True).stdout
    tuned, count = out.split()
    return tuned == "True", int(count)


def test_a_tuned_worker_reuses_the_memory_of_freed_large_arrays():
    tuned, with_tuning = faults("tuned")
    _, without = faults("plain")
    assert tuned  # glibc (this platform) takes the thresholds
    # 30 arrays of 40-48 MiB: untuned, each is a fresh mapping faulted in (2 MiB pages or 4 KiB ones); tuned, the
    # heap's freed blocks serve them
    assert without >= 30 * 20 and with_tuning * 10 < without, (with_tuning, without)


def test_outside_spark_workers_the_allocator_is_left_alone():
    assert tune_allocator_in_worker() is False  # the test process is a user's process, not a Spark worker
