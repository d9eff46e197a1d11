"""What the CLI shows: a store's description, message iteration with filters, JSON rendering, consumer lag."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from pathlib import Path
from typing import Iterator, Optional

import pyarrow.compute as pc

from ..errors import InvalidArgumentError, RocketStoreError, StoreFormatError
from ..store import RocketStore, broker_managed, is_remote, load_topic_table, scandir, staged_jobs, topics_path


def _unit_store_time(s: RocketStore, units) -> Optional[int]:
    """The store time of the record a one-unit read points at; None when the read gave no unit (a damaged
    queue whose first key is not where its offset table says: the report still describes the rest)."""
    if not len(units):
        return None
    found = s.store_time_at(int(units[0]["phy_offset"]), int(units[0]["size"]))
    return None if found < 0 else found  # -1: no record there (a unit into a missing commit-log file)


def describe_store(s: RocketStore) -> dict:
    """Sizes, recovery status, per-topic queues/counts/time ranges, index files, checkpoint, disk use."""
    rec = s.recovery
    lost = s.lost_ranges()
    missing = {}  # (topic, queue id) -> messages lost inside the queue's offsets (units into missing files)
    for r in lost:
        if r.gap_end is not None:
            missing[(r.topic, r.queue_id)] = missing.get((r.topic, r.queue_id), 0) + r.count
    topics = []
    for topic in s.topics():
        queues, first, last, total = [], None, None, 0
        for qid in s.queue_ids(topic):
            lo, hi = s.min_offset(topic, qid), s.max_offset(topic, qid)
            queues.append({"queueId": qid, "min": lo, "max": hi})
            total += hi - lo - missing.get((topic, qid), 0)
            if hi > lo:
                cq = s.consume_queue(topic, qid)
                t0, t1 = _unit_store_time(s, cq.units(lo, lo + 1)), _unit_store_time(s, cq.units(hi - 1, hi))
                first = t0 if t0 is not None and (first is None or 0 < t0 < first) else first
                last = t1 if t1 is not None and (last is None or t1 > last) else last
        topics.append({"topic": topic, "queues": queues, "messages": total, "first_ms": first, "last_ms": last})
    cp = s.checkpoint()
    index_files, index_problem = [], None
    try:
        index_files = s.index_files()
    except RocketStoreError as e:  # a damaged or undetectable index: the report shows the rest of the store
        index_problem = str(e)
    return {
        "path": str(s.root),
        "variant": dict(s.variant.as_dict(), settings=s.settings.as_options(),
                        dledgerCommitted=None if s.dledger_committed() is None else
                        dict(zip(("committedIndex", "committedPos"), s.dledger_committed()))),
        "sizes": {k: v for k, v in s.sizes.__dict__.items() if v != ""},
        "recovery": {"mode": rec.mode, "valid_end": rec.valid_end, "problem": rec.stop_problem,
                     "file": rec.stop_file},
        "abort": s.abort_present,
        "lost": [{"topic": r.topic, "queueId": r.queue_id, "from": r.start, "to": r.end, "messages": r.count,
                  "phy_offset": r.phy_offset, "file": r.file, "missing_file": r.gap_end is not None}
                 for r in lost],
        "min_phy_offset": s.min_phy_offset(),
        "commitlog_files": len(s.commitlog.queue.files),
        "missing_commitlog_files": s.missing_commit_log_files(),
        "topics": topics,
        "index_files": [{"name": f.name, "entries": max(f.header.index_count - 1, 0),
                         "begin_ms": f.header.begin_timestamp, "end_ms": f.header.end_timestamp,
                         "end_phy": f.header.end_phy_offset} for f in index_files],
        "index_problem": index_problem,
        "checkpoint": None if cp is None else cp.__dict__,
        # with the commit-log paths outside the root (storePathCommitLog)
        "disk_bytes": _disk_bytes(s.root) + sum(_disk_bytes(p) for p in s.settings.commit_log_paths),
        "staging": [j.as_dict() for j in staged_jobs(s.root)],
        "topic_table": topic_table_status(s),
        "stray_files": [str(stray) for stray in s.stray_files],
    }


def topic_table_status(s: RocketStore) -> dict:
    """The broker's topic table: where it is, how many topics it lists, and which topics with queues it lacks
    (a broker started on this store would not serve them)."""
    status = {"path": str(topics_path(s.root)), "exists": topics_path(s.root).exists()}
    try:
        listed = load_topic_table(s.root).get("topicConfigTable", {})
    except StoreFormatError as e:  # a read-only report: say so, and show the rest of the store anyway
        return {**status, "error": str(e), "topics": 0, "unlisted": []}
    return {**status, "error": None, "topics": len(listed),
            "unlisted": [t for t in s.topics() if t not in listed and not broker_managed(t)]}


def _disk_bytes(root: Path) -> int:
    """Bytes the store takes: allocated blocks locally (preallocated files are sparse), object sizes remotely."""
    if is_remote(root):
        return _listed_bytes(root)
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def _listed_bytes(directory) -> int:
    return sum(_listed_bytes(e.path) if e.is_dir() else e.stat().st_size for e in scandir(directory))


def iter_messages(s: RocketStore, topic: Optional[str], queue: Optional[int], start: Optional[int],
                  end: Optional[int], tags: Optional[str], since: Optional[int], until: Optional[int],
                  limit: Optional[int], starts: Optional[list] = None) -> Iterator[dict]:
    """Messages in queue order (commit-log order without a topic), filtered, as dicts. ``starts``: instead,
    the queues ``(topic, queue id, first offset)`` to read, each in queue order."""
    count = 0
    if starts is not None:
        batches = (b for t, q, first in starts for b in s.read_queue(t, q, first, end, tags=tags))
    elif topic is None:
        batches = s.scan_raw()
    else:
        qids = [queue] if queue is not None else s.queue_ids(topic)
        batches = (b for q in qids for b in s.read_queue(topic, q, start, end, tags=tags))
    for batch in batches:
        ts = batch.column("storeTimestamp").cast("int64")
        mask = None
        for bound, op in ((since, pc.greater_equal), (until, pc.less)):
            if bound is not None:
                part = op(ts, bound)
                mask = part if mask is None else pc.and_(mask, part)
        if mask is not None:
            batch = batch.filter(mask)
        for row in batch.to_pylist():
            yield row
            count += 1
            if limit is not None and count >= limit:
                return


def group_starts(s: RocketStore, group: str, topic: Optional[str], queue: Optional[int]) -> tuple[list, list]:
    """Where consumer ``group`` stands in ``topic`` (every topic it consumes when None; ``queue`` only when
    given): ``(topic, queue id, first offset)`` per queue it has not consumed to the end, and the warnings for
    committed offsets whose messages expired (those queues start at their first stored message)."""
    starting = s.group_starting_offsets(group)
    if topic is not None and topic not in starting:
        raise InvalidArgumentError(f"consumer group {group!r} has committed no offset for topic {topic!r}; its "
                                   f"topics are {', '.join(sorted(starting)) or 'none'}")
    out, warnings = [], []
    for name in [topic] if topic is not None else sorted(starting):
        for qid, committed in sorted(((int(q), o) for q, o in starting[name].items())):
            if (queue is not None and qid != queue) or not s.has_queue(name, qid):
                continue
            first, end = s.queue_edges(name, qid)
            if committed < first:
                warnings.append(f"{name}/{qid}: {group} stands at {committed}, but offsets before {first} expired; "
                                f"reading from {first}")
            if max(committed, first) < end:
                out.append((name, qid, max(committed, first)))
    return out, warnings


def message_json(row: dict) -> str:
    """One message as JSON: body as UTF-8 text when it is, else base64 (``bodyBase64``)."""
    out = {}
    for key, value in row.items():
        if key == "body":
            try:
                out["body"] = value.decode("utf-8")
            except UnicodeDecodeError:
                out["bodyBase64"] = base64.b64encode(value).decode()
        elif isinstance(value, dt.datetime):
            out[key] = int(value.timestamp() * 1000)
        elif key == "properties" and value is not None:
            out[key] = dict(value)
        else:
            out[key] = value
    return json.dumps(out, ensure_ascii=False)


def load_offsets(text: str) -> dict:
    """Committed offsets: JSON text, a JSON file, or a Structured Streaming checkpoint directory (its newest
    ``offsets/<batch>`` file holds the source's offsets on its last line)."""
    path = Path(text)
    if path.is_dir():
        offsets_dir = path / "offsets" if (path / "offsets").is_dir() else path
        batches = sorted((p for p in offsets_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        if not batches:
            raise InvalidArgumentError(f"--offsets: no committed batch in {offsets_dir}: give the checkpoint "
                                       "directory of a query that has run at least one batch (its offsets/ holds "
                                       "files named 0, 1, ...), or offsets as JSON")
        where, source = f"{batches[-1]} (its last line)", batches[-1].read_text().strip().splitlines()[-1]
    elif path.is_file():
        where, source = str(path), path.read_text()
    else:
        where, source = "the argument", text
    try:
        offsets = json.loads(source)
    except json.JSONDecodeError as e:
        hint = "" if where != "the argument" or text.lstrip().startswith("{") else (
            f"; {text!r} is no existing file or directory either")
        raise InvalidArgumentError(f"--offsets: {where} is not JSON offsets ({e.msg} at character {e.pos}){hint}; "
                                   'expected {"topic": {"0": 42}}, {"broker": {"topic": {"0": 42}}} or a '
                                   "streaming checkpoint directory") from e
    if not isinstance(offsets, dict):
        raise InvalidArgumentError(f'--offsets: expected a JSON object such as {{"topic": {{"0": 42}}}}, found '
                                   f"{source.strip()[:80]!r}")
    return offsets


def consumer_lag(s: RocketStore, offsets: dict) -> list[dict]:
    """Per queue: committed next offset, the queue's max offset and the difference (never negative).
    ``offsets`` is ``{"broker": {"topic": {"qid": next}}}`` or, for one store, ``{"topic": {"qid": next}}``."""
    if offsets and all(isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()) for v in offsets.values()):
        merged: dict = {}
        for per_broker in offsets.values():
            for topic, queues in per_broker.items():
                merged.setdefault(topic, {}).update(queues)
        offsets = merged
    rows = []
    for topic, queues in sorted(offsets.items()):
        if not isinstance(queues, dict):
            raise InvalidArgumentError(f'--offsets: expected {{"queueId": offset}} for topic {topic!r}, found '
                                       f"{queues!r}")
        if topic not in s.topics():
            continue
        for qid in s.queue_ids(topic):
            value = queues.get(str(qid), queues.get(qid, s.min_offset(topic, qid)))
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidArgumentError(f"--offsets: the offset of {topic}/{qid} must be an integer, found "
                                           f"{value!r}")
            committed = value
            top = s.max_offset(topic, qid)
            rows.append({"topic": topic, "queueId": qid, "committed": committed, "max": top,
                         "lag": max(top - committed, 0)})
    return rows
