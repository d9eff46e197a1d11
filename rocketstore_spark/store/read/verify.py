"""Full structural check of a store (``rocketstore verify``).

* every commit-log record passes RocketMQ's own checks (magic, length arithmetic, body CRC) and every file but
  the last ends with a BLANK marker;
* every consume-queue unit points at a record of its topic and queue with the unit's size and queue offset;
* every index entry points at a record that carries a key with the entry's hash;
* the checkpoint's timestamps are plausible for the records present;
* no commit-log file is missing between others, and no consume queue points into one or past the commit log's
  valid end (messages a cut copy lost, per queue).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pyarrow.compute as pc

from ...errors import RocketStoreError
from ..files.commitlog import END_BLANK, END_INVALID
from ..format import layout as L
from ..format.java_hash import java_string_hashes
from .store_reader import StoreReader

DAY_MS = 86_400_000


@dataclass(frozen=True)
class Problem:
    where: str
    message: str


Progress = Optional[Callable[[str, int, int], None]]  # (phase, done, total)


def verify_store(store: StoreReader, progress: Progress = None) -> list[Problem]:
    problems: list[Problem] = []
    problems += _verify_commitlog(store, progress)
    problems += _verify_queues(store, progress)
    problems += [Problem(f"{r.topic}/{r.queue_id}@{r.start}", f"lost messages: {r.describe()}")
                 for r in store.lost_ranges()]
    problems += _verify_index(store, progress)
    problems += _verify_checkpoint(store)
    return problems


def _verify_commitlog(store: StoreReader, progress: Progress) -> list[Problem]:
    out = []
    files = store.commitlog.queue.files
    valid_end = store.max_phy_offset()
    for i, info in enumerate(files):
        if progress:
            progress("commit log", i, len(files))
        walk = store.commitlog.walk_file(i, check_crc=True)
        end = info.from_offset + walk.end_position
        if walk.end_kind == END_INVALID and end < valid_end:
            out.append(Problem(f"{info.path}@{walk.end_position}", f"invalid record: {walk.problem}"))
        elif walk.end_kind != END_BLANK and i + 1 < len(files) and \
                info.from_offset + store.sizes.commit_log_file_size <= valid_end:
            out.append(Problem(f"{info.path}@{walk.end_position}",
                               "data ends inside a commit-log file that is followed by another (expected BLANK)"))
        elif walk.end_kind == END_INVALID:
            out.append(Problem(f"{info.path}@{walk.end_position}",
                               f"torn tail (recovery ends the log here): {walk.problem}"))
    for name in store.missing_commit_log_files():
        out.append(Problem(str(store.commitlog.queue.directory / name),
                           "commit-log file missing between others (a copy with holes): its messages are lost"))
    if progress:
        progress("commit log", len(files), len(files))
    return out


def _verify_queues(store: StoreReader, progress: Progress) -> list[Problem]:
    out = []
    queues = [(t, q) for t in store.topics() for q in store.queue_ids(t)]
    for k, (topic, qid) in enumerate(queues):
        if progress:
            progress("consume queues", k, len(queues))
        lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
        try:
            # units into missing commit-log files are lost ranges, reported below
            for batch in store.read_queue(topic, qid, lo, hi, columns=("topic", "queueId", "queueOffset"),
                                          fail_on_data_loss=False):
                bad_topic = np.asarray(pc.not_equal(batch.column(0), topic))
                bad_queue = np.asarray(batch.column(1)) != qid
                for i in np.flatnonzero(bad_topic | bad_queue)[:3]:
                    out.append(Problem(f"consumequeue/{topic}/{qid} offset {batch.column(2)[int(i)].as_py()}",
                                       f"unit points at a record of {batch.column(0)[int(i)].as_py()}/"
                                       f"{batch.column(1)[int(i)].as_py()}"))
        except RocketStoreError as e:
            out.append(Problem(f"consumequeue/{topic}/{qid}", str(e)))
    if progress:
        progress("consume queues", len(queues), len(queues))
    return out


def _verify_index(store: StoreReader, progress: Progress) -> list[Problem]:
    out = []
    try:
        files = store.index_files()
    except RocketStoreError as e:  # the index cannot be read at all: that is the finding, the rest still runs
        return [Problem(str(store.root / L.INDEX_DIR), str(e))]
    for k, f in enumerate(files):
        if progress:
            progress("index", k, len(files))
        count = f.header.index_count
        if count <= 1:
            continue
        entries = f.used_entries()
        phy = entries["phy_offset"].astype(np.int64)
        inside = (phy >= store.min_phy_offset()) & (phy < store.max_phy_offset())
        for i in np.flatnonzero(~inside)[:3]:
            out.append(Problem(f"{f.path} entry {int(i) + 1}", f"points at offset {int(phy[i])} outside the log"))
        inside &= ~store.commitlog.in_missing(phy)  # entries into missing commit-log files: no record to check
        uniq_phy, inverse = np.unique(phy[inside], return_inverse=True)
        try:
            table = store.read_records_at(uniq_phy, ("commitLogOffset", "topic", "uniqKey", "keys"))
        except RocketStoreError as e:
            out.append(Problem(str(f.path), f"an entry points at a bad record: {e}"))
            continue
        rows = table.to_pylist()
        # every record's keys hashed in one call (one call per record cost seconds on a 20,000-entry file)
        texts, owner = [], []
        for r, row in enumerate(rows):
            keys = ([row["uniqKey"]] if row["uniqKey"] is not None else []) + row["keys"]
            texts += [f"{row['topic']}#{k}" for k in keys]
            owner += [r] * len(keys)
        allowed = [set() for _ in rows]
        for r, h in zip(owner, _hashes(texts)):
            allowed[r].add(h)
        hashes = entries["key_hash"][inside].astype(np.int64)
        for h, r in zip(hashes, inverse):
            if int(h) not in allowed[int(r)]:
                out.append(Problem(f"{f.path} entry", f"key hash {int(h)} matches no key of the record at "
                                                      f"{int(uniq_phy[r])}"))
                break
    if progress:
        progress("index", len(files), len(files))
    return out


def _hashes(texts: list) -> list[int]:
    """``IndexFile.indexKeyHashMethod`` of each ``topic#key`` text."""
    if not texts:
        return []
    h = np.abs(java_string_hashes(texts).astype(np.int64))
    return [0 if v >= 1 << 31 else int(v) for v in h]


def _verify_checkpoint(store: StoreReader) -> list[Problem]:
    cp = store.checkpoint()
    if cp is None:
        return [Problem(L.CHECKPOINT_FILE, "no checkpoint file (RocketMQ writes one on shutdown)")]
    out = []
    last = store.read_records_at([_last_record(store)], ("storeTimestamp",)) if store.max_phy_offset() else None
    if last is not None and last.num_rows:
        newest = int(last.column(0).cast("int64")[0].as_py())
        for name in ("physic_msg_timestamp", "logics_msg_timestamp"):
            value = getattr(cp, name)
            if value > newest + DAY_MS:
                out.append(Problem(L.CHECKPOINT_FILE, f"{name} {value} is later than the newest record ({newest})"))
    return out


def _last_record(store: StoreReader) -> int:
    walks = store.recovery.walks
    for walk in reversed(walks):
        if len(walk):
            return int(store.commitlog.queue.files[walk.file_index].from_offset + walk.positions[-1])
    return 0
