"""Every memory map and file handle is released on every error path: opening and failing damaged stores over and
over in one process leaves no descriptor or map of their files behind."""

import os
import shutil
import struct
import warnings
from pathlib import Path

import pytest

from rocketstore_spark.errors import RocketStoreError, StrayFileWarning
from rocketstore_spark.store import RocketStore
from tests.store.fuzz_cases import link_or_copy, record_fields

ENTRIES_AT = 40 + 5000 * 4  # the golden index files: 5000 hash slots


def linked_copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, copy_function=link_or_copy)
    return target


def private(path: Path) -> bytearray:
    """The bytes of ``path``, no longer shared with the golden store through the hard link."""
    data = bytearray(path.read_bytes())
    path.unlink()
    path.write_bytes(bytes(data))
    return data


def patch(path: Path, at: int, new: bytes) -> None:
    data = private(path)
    data[at:at + len(new)] = new
    path.write_bytes(bytes(data))


def cq_files(store: Path, topic: str, qid: int) -> list:
    return sorted((store / "consumequeue" / topic / str(qid)).iterdir())


def _gap_in_the_last_queue(s):
    last = sorted((s / "consumequeue").iterdir())[-1]
    queue = sorted(p for p in last.iterdir())[-1]
    files = sorted(queue.iterdir())
    if len(files) < 3:  # needs a middle file: use a queue that has one
        queue = s / "consumequeue" / "TopicTest" / "2"
        files = sorted(queue.iterdir())
    files[1].unlink()


def _bad_record_under_a_queue(s):
    unit = cq_files(s, "TopicTest", 2)[0].read_bytes()[:20]
    phy = struct.unpack(">q", unit[:8])[0]
    name = f"{phy - phy % 1048576:020d}"
    patch(s / "commitlog" / name, phy % 1048576 + 4, b"\0\0\0\0")  # MAGICCODE


def _body_bit(s):
    units = cq_files(s, "TopicTest", 2)[0].read_bytes()
    for at in range(0, len(units), 20):  # the first record of the queue with a body
        phy = struct.unpack_from(">q", units, at)[0]
        path = s / "commitlog" / f"{phy - phy % 1048576:020d}"
        body_at, body_len = record_fields(path.read_bytes(), phy % 1048576, 1)["BODY"]
        if body_len > 0:
            data = private(path)
            data[body_at + body_len // 2] ^= 0x10
            path.write_bytes(bytes(data))
            return


def _index_newest_entry(s):
    path = sorted((s / "index").iterdir())[0]
    patch(path, ENTRIES_AT + 19999 * 20, b"\x7f\xff\xff\xfe")


def _index_count(s):
    path = sorted((s / "index").iterdir())[-1]
    patch(path, 36, b"\x00\x01\x00\x00")


def _short_checkpoint(s):
    private(s / "checkpoint")
    (s / "checkpoint").write_bytes(b"\0" * 7)


def _truncated_cq(s):
    path = cq_files(s, "TopicTest", 2)[-1]
    data = private(path)
    path.write_bytes(bytes(data[:4000]))


def _strays(s):
    (s / "commitlog" / "00000000000000000000~").write_bytes(b"x")
    (s / "index" / ".nfs0000000000aa").write_bytes(b"")


DAMAGE = [_gap_in_the_last_queue, _bad_record_under_a_queue, _body_bit, _index_newest_entry, _index_count,
          _short_checkpoint, _truncated_cq, _strays]


def exercise(store: Path, quiet: bool = True) -> None:
    """Open, read until the damage shows (or everything was read), close — errors are expected."""
    try:
        with RocketStore.open(store) as s:
            for _batch in s.read_queue("TopicTest", 2):
                pass
            s.query_by_key("TopicTest", "order-42")
            list(s.scan_raw(columns=["commitLogOffset"], verify_crc=True))
    except RocketStoreError:
        if not quiet:
            raise


def held(prefix: str) -> tuple:
    """(descriptors, mapped regions) of this process that point into ``prefix``, and all descriptors."""
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)
        except OSError:
            pass  # the descriptor listdir itself used, gone by now
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        maps = sum(prefix in line for line in fh)
    return fds, maps, len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def damaged(golden_store_path, tmp_path_factory) -> list:
    root = tmp_path_factory.mktemp("damaged")
    stores = []
    for damage in DAMAGE:
        store = linked_copy(golden_store_path, root / damage.__name__.strip("_"))
        damage(store)
        stores.append(store)
    return stores


def _cycle(stores, rounds: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StrayFileWarning)
        for i in range(rounds):
            exercise(stores[i % len(stores)])


def _check(stores, rounds: int) -> None:
    prefix = str(stores[0].parent)
    _cycle(stores, len(stores))  # warm-up: imports, caches, the allocator's own maps
    before = held(prefix)
    _cycle(stores, rounds)
    after = held(prefix)
    assert after[:2] == (0, 0), f"descriptors / maps of store files still held: {after[:2]}"
    assert after[2] <= before[2], f"open descriptors grew from {before[2]} to {after[2]}"


@pytest.mark.timeout(300)
def test_failing_reads_of_damaged_stores_release_their_files(damaged):
    _check(damaged, 8 * len(damaged))


def test_every_damage_really_fails_somewhere(damaged, caplog):
    """Guard against a vacuous pass: each damaged store raises on the way, but two: the stray files are skipped
    with a warning, and the cut last consume-queue file is read up to its cut with a warning naming the file."""
    failing = []
    for store in damaged:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StrayFileWarning)
                exercise(store, quiet=False)
        except RocketStoreError:
            failing.append(store.name)
    assert sorted(failing) == sorted(s.name for s in damaged if s.name not in ("strays", "truncated_cq"))
    assert any("truncated_cq" in r.getMessage() and "is cut" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_thousands_of_failing_opens_release_their_files(damaged):
    _check(damaged, 2000)
