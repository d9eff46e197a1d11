"""The store lock: asking whether a broker or writer holds it takes nothing and changes nothing."""

import os
import subprocess
import sys
import textwrap

from rocketstore_spark.store import RocketStore, StoreLock, store_lock_held


def test_a_held_lock_is_seen_without_taking_it(tmp_path):
    store = tmp_path / "store"
    assert not store_lock_held(store)  # no store, no lock file
    with RocketStore.open_writer(store, commit_log_file_size=4096, consume_queue_file_size=600):
        assert store_lock_held(store)  # a writer of this process
    lock = store / "lock"
    before = (lock.read_bytes(), os.stat(lock).st_mtime_ns)
    assert not store_lock_held(store)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(lock)!r}, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert store_lock_held(store)  # a broker's process
        assert store_lock_held(store)
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert not store_lock_held(store)
    assert (lock.read_bytes(), os.stat(lock).st_mtime_ns) == before
    StoreLock.acquire(store).release()  # probing left no lock behind in this process
