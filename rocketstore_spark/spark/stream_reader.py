"""``spark.readStream.format("rocketstore")``: micro-batches over stores that keep growing.

Offsets are ``{"<brokerName>": {"<topic>": {"<queueId>": nextOffset}}}`` (end exclusive). ``latestOffset`` reads
consume-queue tails only: a unit counts when it is complete and the record it points to is complete and
checks out (so a half-written unit or record is never handed out). Topics and queues that appear later are
read from their earliest offset. ``maxMessagesPerTrigger`` and ``maxBytesPerTrigger`` (and on Spark >= 4.2 the
engine's read limits) bound each batch, shared out across queues in proportion to their backlog; bytes are the
consume-queue units' record sizes. ``reportLatestOffset`` puts the lag behind the newest offsets into the query's
progress (:func:`backlog_lag`).

``Trigger.AvailableNow``: on Spark >= 4.2 the reader implements ``SupportsTriggerAvailableNow`` and reads up
to the offsets current when the query starts, in bounded batches. Spark 4.0/4.1 pass no start offset and no
read limit to ``latestOffset`` and run AvailableNow/Once as a single batch: the reader then bounds every batch
by the options' bounds from the end of the last batch Spark planned (Spark replays or re-plans that batch
through ``partitions`` when a query restarts from its checkpoint), so an AvailableNow run reads at most that
many messages and the next run goes on from there (a warning says so).
"""

from __future__ import annotations

import logging
from typing import Optional

from pyspark.sql.datasource import DataSourceStreamReader

from ..errors import DataLossError
from ..store import (
    LiveTail,
    RocketStore,
    StoreHistory,
    TieredQueues,
    detect_variant,
    is_remote,
    resolve_store_root,
    store_lock_held,
)
from ..store.format import layout as L
from .history_plan import HistoryHandle, HistoryPartition
from .options import EARLIEST, LATEST, ReadOptions, StoreRef
from .planning import (  # noqa: F401 - pack_ranges is re-exported
    QueuePartition,
    QueueRangesPartition,
    StoreHandle,
    handle_settings,
    handle_sizes,
    pack_ranges,
    report_lost,
    split_range,
)
from .reader import RocketStoreReader
from .store_cache import OPEN_STORES, open_cached
from .store_snapshot import files_stamp

try:  # Spark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - Spark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = ReadMaxBytes = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

#: Whether this Spark passes read limits (and AvailableNow's bounded batches) to Python streaming sources.
ENGINE_READ_LIMITS = ReadMaxRows is not None

log = logging.getLogger("rocketstore_spark")
Offsets = dict  # broker → topic → str(queue id) → next offset
#: lag in bytes is counted from at most this many consume-queue units per trigger; beyond, it is estimated
LAG_BYTES_UNITS = 1 << 20
STREAM_LOSS_ADVICE = "Restart the query from offsets past them, or set failOnDataLoss=false to read what is left"


def stream_key(ref: StoreRef, lazy: bool) -> tuple:
    """The key of a store a stream opened in :data:`~.store_cache.OPEN_STORES`."""
    return ("stream", ref.path, lazy)


def open_live(ref: StoreRef, opts: ReadOptions, tail: Optional[LiveTail] = None) -> RocketStore:
    """A store opened without recovery: streaming trusts consume-queue tails checked record by record. With a
    tail (whose sizes are known) the store loads only the queues it is asked about.

    The store is the worker's cached one (:func:`.store_cache.open_cached`; the cache owns it, callers do not
    close it) while its files did not change: a local store's :class:`.StoreSnapshot` (a queue loaded after the
    snapshot only grows with the commit log, whose files it stats; a store written within
    :data:`~.store_snapshot.RACY_NS` of the open is opened again every time), while a remote store is opened
    again for every use (listing it to find out costs as much as its lazy open)."""
    sizes = dict(opts.sizes)
    if tail is not None:
        sizes.update(commit_log_file_size=tail.sizes.commit_log_file_size,
                     consume_queue_file_size=tail.sizes.consume_queue_file_size)
    options = (tuple(sorted(sizes.items())), opts.variant, tuple(sorted(opts.settings.items())))

    def live() -> RocketStore:
        return RocketStore.open(ref.path, **sizes, valid_end=1 << 62, lazy_queues=tail is not None,
                                variant=opts.variant, fs_options=dict(ref.fs_options), **opts.settings)

    return open_cached(stream_key(ref, tail is not None), options, live,
                       lambda store, opened_at: files_stamp(store, ref.path, opened_at, list_remote=False))


def live_ends(store: RocketStore, opts: ReadOptions) -> dict:
    """topic → queue id → next offset whose units and records are complete (checked from the tail back)."""
    out: dict = {}
    for topic in store.topics():
        if not opts.wants_topic(topic):
            continue
        for qid in store.queue_ids(topic):
            out.setdefault(topic, {})[str(qid)] = store.complete_queue_end(topic, qid)
    return out


def backlog_lag(store_of, latest: Offsets, end: Offsets) -> dict:
    """What a query has not read yet once it reaches ``end``: ``latestOffsets`` (``latest``), and the messages,
    queues and bytes behind them. Bytes come from the consume-queue units of at most :data:`LAG_BYTES_UNITS`
    messages, shared across queues by backlog; a larger backlog's bytes are estimated from those
    (``bytesBehindEstimated``). ``store_of(broker)`` is the broker's open store."""
    behind = {}
    for broker, topics in latest.items():
        for topic, queues in topics.items():
            for qid, top in queues.items():
                done = end.get(broker, {}).get(topic, {}).get(qid, top)
                if int(top) > int(done):
                    behind[(broker, topic, qid)] = (int(done), int(top))
    messages = sum(hi - lo for lo, hi in behind.values())
    sampled = share_limit({k: hi - lo for k, (lo, hi) in behind.items()}, LAG_BYTES_UNITS) if behind else {}
    counted_messages = counted_bytes = 0
    for (broker, topic, qid), n in sampled.items():
        lo = behind[(broker, topic, qid)][0]
        store = store_of(broker)
        if n and store.has_queue(topic, int(qid)):
            counted_bytes += store.queue_bytes(topic, int(qid), lo, lo + n)
            counted_messages += n
    estimated = counted_messages < messages
    size = counted_bytes if not estimated else round(counted_bytes / max(counted_messages, 1) * messages)
    return {"latestOffsets": latest, "messagesBehind": messages, "queuesBehind": len(behind),
            "bytesBehind": size, "bytesBehindEstimated": estimated}


def share_limit(backlog: dict, limit: int) -> dict:
    """Split ``limit`` messages across queues in proportion to their backlog (at least one each, in order)."""
    total = sum(backlog.values())
    if total <= limit:
        return dict(backlog)
    shares = {k: (v * limit) // total for k, v in backlog.items()}
    left = limit - sum(shares.values())
    for k in sorted(backlog, key=lambda k: backlog[k] - shares[k], reverse=True):
        if left <= 0:
            break
        if shares[k] < backlog[k]:
            shares[k] += 1
            left -= 1
    return shares


class RocketStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, spark_columns: tuple[str, ...]):
        self.opts = opts
        self.spark_columns = spark_columns
        self._batch = RocketStoreReader(opts, spark_columns)
        self._available_now_target: Optional[Offsets] = None
        # Spark 4.0/4.1 call latestOffset() without a start: the end of the last batch Spark planned stands in
        self._last_end: Optional[Offsets] = None
        self._warned_old_spark = False
        # broker → LiveTail: the queue ends followed across triggers (the reader lives as long as the query)
        self._tails: dict = {}
        # broker → (the last look: commit-log extent and queue ends, whether it found the store still), and
        # broker → (the look, {(topic, queue id): [LostRange]}): see _losses
        self._looks: dict = {}
        self._lost: dict = {}
        # the last latestOffset call's available offsets and the batch end it chose: reportLatestOffset's lag
        self._seen: Optional[tuple[Offsets, Offsets]] = None
        # tieredStorePath: the broker's tiered storage, read where a queue starts before the local store's first
        self._tiered = None if opts.tiered_path is None else TieredQueues(opts.tiered_path)

    # --- offsets ------------------------------------------------------------------------------------------

    def _tail(self, ref: StoreRef) -> Optional[LiveTail]:
        """The broker's LiveTail; None for storage variants whose queues it does not follow (DLedger's log,
        RocksDB or batch consume queues, LMQ's extra units) and split commit logs: those re-check every queue per
        trigger."""
        if ref.broker not in self._tails:
            variant = detect_variant(resolve_store_root(ref.path, dict(ref.fs_options)), self.opts.variant,
                                     self.opts.settings.get("dledger_self_id"),
                                     self.opts.settings.get("batch_topics"))
            # a commit log split across paths is re-checked per trigger as well
            split = "commit_log_path" in self.opts.settings
            self._tails[ref.broker] = None if variant.features or split else \
                LiveTail.open(ref.path, self.opts.wants_topic, fs_options=dict(ref.fs_options), **self.opts.sizes)
        return self._tails[ref.broker]

    def _latest(self) -> Offsets:
        """Every wanted queue's complete end: the first trigger checks each queue, later ones follow the commit
        log from where the last stopped and re-check only the queues its new records went to. A queue that
        certainly lost messages (:meth:`_losses`) ends past them: the next batch needs them, and reports them."""
        out: Offsets = {}
        for ref in self.opts.stores:
            tail = self._tail(ref)
            store = open_live(ref, self.opts, tail)  # the cache's: not closed here
            ends = live_ends(store, self.opts) if tail is None else tail.ends()  # fresh dicts, ours
            losses = self._losses(ref, store, ends)  # keeps ends as its look: changed on a copy below
            if losses:
                ends = {topic: dict(queues) for topic, queues in ends.items()}
            for (topic, qid), lost in losses.items():
                queues = ends.setdefault(topic, {})
                queues[str(qid)] = max([int(queues.get(str(qid), 0))] + [r.end for r in lost])
            out[ref.broker] = ends
        return out

    def _losses(self, ref: StoreRef, store, ends: Optional[dict] = None) -> dict:
        """(topic, queue id) → the :class:`LostRange` s of the messages the store (``store``: opened live)
        certainly lost, a cut copy's units pointing past where the commit log's records end or into commit-log
        files missing between others (see ``RocketStore.lost_ranges``); empty while the store is live
        (:meth:`partitions` then still finds the units pointing into missing files, which no writer fills).

        A live store's newest units may point at records still being written, so loss is only certain when the
        store is still: no process holds its lock (a broker or a writer), and this look (``ends``, the queue ends
        :meth:`_latest` found, and the commit log's files) is the same as the last one. The ranges are found by a
        recovering open (seconds at 20,000 queues), once per still look: never in the trigger that finds new
        messages, which is the one a query waits for. :meth:`partitions` (``ends`` None) goes by the last look
        (by the files alone when there was none: a query restarted from its checkpoint plans its last batch
        first)."""
        files = store.commitlog.queue.files
        extent = (len(files), files[-1].from_offset, files[-1].length) if files else (0, 0, 0)
        locked = not is_remote(store.root) and store_lock_held(store.root)
        last = self._looks.get(ref.broker)
        if ends is None and last is not None:  # partitions: the last look's verdict, while the files are as seen
            look, still = last
            still = still and look[0] == extent and not locked
        else:
            look = (extent, ends)
            still = (last is None or last[0] == look) and not locked
            self._looks[ref.broker] = (look, still)
        if not still:
            self._lost.pop(ref.broker, None)
            return {}
        known = self._lost.get(ref.broker)
        if known is None or known[0] != look:
            with RocketStore.open(ref.path, **self.opts.sizes, variant=self.opts.variant,
                                  fs_options=dict(ref.fs_options), **self.opts.settings) as recovered:
                lost: dict = {}
                for r in recovered.lost_ranges():
                    if self.opts.wants_topic(r.topic):
                        lost.setdefault((r.topic, r.queue_id), []).append(r)
            known = self._lost[ref.broker] = (look, lost)
        return known[1]

    def initialOffset(self) -> Offsets:
        latest = self._latest()
        start = self.opts.starting_offsets
        out: Offsets = {}
        for ref in self.opts.stores:
            store = open_live(ref, self.opts, self._tail(ref))
            for topic, queues in latest.get(ref.broker, {}).items():
                for qid in queues:
                    out.setdefault(ref.broker, {}).setdefault(topic, {})[qid] = \
                        self._initial_for(store, ref, topic, int(qid), queues[qid], start)
        if self._last_end is None:  # a restarted query asks for it too, after replaying its last batch
            self._last_end = out
        return out

    def _initial_for(self, store, ref, topic, qid, latest, start) -> int:
        if self._tiered is not None:  # times before the local store's first message: the tiered storage answers
            store = StoreHistory(store, self._tiered)
        if self.opts.starting_timestamp is not None:
            return store.offset_by_time(topic, qid, self.opts.starting_timestamp, "lower")
        if self.opts.starting_timestamps is not None:
            times = self.opts.starting_timestamps
            node = times.get(ref.broker, {}) if len(self.opts.stores) > 1 else times
            at = node.get(topic, {}).get(str(qid))
            if at is not None:
                return store.offset_by_time(topic, qid, at, "lower")
        if isinstance(start, dict):
            node = start.get(ref.broker, {}) if len(self.opts.stores) > 1 else start
            value = node.get(topic, {}).get(str(qid))
            if value is not None and value >= 0:
                return int(value)
            start = EARLIEST if value == -2 else LATEST if value == -1 else LATEST
        return self._history_first(store, topic, qid) if start == EARLIEST else latest

    def _history_first(self, store, topic: str, qid: int) -> int:
        """The queue's first offset: the local store's, or with ``tieredStorePath`` the tiered storage's when it
        reaches further back."""
        first = store.min_offset(topic, qid)
        if self._tiered is not None and self._tiered.queue(topic, qid) is not None:
            first = min(first, self._tiered.edges(topic, qid)[0])
        return first

    def _tiered_part(self, ref: StoreRef, store, topic: str, qid: int, lo: int, hi: int) -> tuple[list, int]:
        """With ``tieredStorePath``: the partitions reading [lo, local first) from the tiered storage, and where
        the local store's part starts."""
        if self._tiered is None or not store.has_queue(topic, qid):
            return [], lo
        local_first = store.min_offset(topic, qid)
        tiered_first, tiered_end = self._tiered.edges(topic, qid)
        stop = min(hi, local_first, tiered_end)
        if lo >= stop or lo < tiered_first:
            return [], lo
        handle = HistoryHandle(None, ref.broker, self.opts.tiered_path)
        step = self.opts.max_messages_per_partition
        return [HistoryPartition(handle, topic, qid, a, min(stop, a + step)) for a in range(lo, stop, step)], stop

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self._latest()

    def getDefaultReadLimit(self):
        """``maxMessagesPerTrigger`` as the engine's row limit (with ``maxBytesPerTrigger`` too, the bytes bound
        is applied alongside whenever the engine passes a limit), or ``maxBytesPerTrigger`` alone as its byte
        limit."""
        if ReadMaxRows is not None and self.opts.max_messages_per_trigger:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        if ReadMaxBytes is not None and self.opts.max_bytes_per_trigger:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def _limits(self, limit) -> tuple[Optional[int], Optional[int]]:
        """(max messages, max bytes) of this batch: the engine's limit (ReadAllAvailable: none), and on Spark
        4.0/4.1, which pass none, the options."""
        opts = self.opts
        if limit is None:  # Spark 4.0/4.1: only the options can bound a batch
            max_rows, max_bytes = opts.max_messages_per_trigger, opts.max_bytes_per_trigger
            if (max_rows or max_bytes) and not self._warned_old_spark:
                self._warned_old_spark = True
                log.warning("Spark < 4.2 has no read limits for Python streaming sources: maxMessagesPerTrigger/"
                            "maxBytesPerTrigger bound every batch, and Trigger.AvailableNow/Once run a single "
                            "batch, so such a run reads one bounded batch (the next run goes on from there)")
            return max_rows, max_bytes
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return limit.max_rows, opts.max_bytes_per_trigger
        if ReadMaxBytes is not None and isinstance(limit, ReadMaxBytes):
            return opts.max_messages_per_trigger, limit.max_bytes
        return None, None

    def latestOffset(self, start: Optional[Offsets] = None, limit=None) -> Offsets:
        start = start if start is not None else (self._last_end or self.initialOffset())
        latest = self._available_now_target or self._latest()
        max_rows, max_bytes = self._limits(limit)
        backlog, end = {}, {}
        for broker, topics in latest.items():
            for topic, queues in topics.items():
                for qid, top in queues.items():
                    begin = start.get(broker, {}).get(topic, {}).get(qid)
                    if begin is None:  # a queue that appeared: read it from its earliest offset
                        begin = self._earliest(broker, topic, int(qid))
                    backlog[(broker, topic, qid)] = max(int(top) - int(begin), 0)
                    end.setdefault(broker, {}).setdefault(topic, {})[qid] = max(int(begin), 0)
        grants = share_limit(backlog, max_rows) if max_rows else backlog
        if max_bytes:
            grants = self._bytes_bound(grants, end, max_bytes)
        for (broker, topic, qid), n in grants.items():
            end[broker][topic][qid] += n
        for broker, topics in start.items():  # keep queues that vanished from the listing
            for topic, queues in topics.items():
                for qid, value in queues.items():
                    end.setdefault(broker, {}).setdefault(topic, {}).setdefault(qid, value)
        self._last_end = end
        self._seen = (latest, end)
        return end

    def _bytes_bound(self, grants: dict, begin: Offsets, max_bytes: int) -> dict:
        """``grants`` (queue → messages from ``begin``) cut so that the batch holds about ``max_bytes`` bytes:
        each queue's share of the bytes in proportion to its backlog's bytes (counted up to ``max_bytes`` a
        queue), and at least one message per queue with a backlog."""
        sized, counted = {}, {}
        for key, n in grants.items():
            broker, topic, qid = key
            if not n:
                continue
            lo = begin[broker][topic][qid]
            sized[key] = self._store(broker).queue_bytes(topic, int(qid), lo, lo + n, cap=max_bytes)
            counted[key] = n
        shares = share_limit(sized, max_bytes)
        out = dict(grants)
        for key, share in shares.items():
            broker, topic, qid = key
            lo = begin[broker][topic][qid]
            out[key] = self._store(broker).offset_within_bytes(topic, int(qid), lo, lo + counted[key],
                                                                max(share, 1)) - lo
        return out

    def _store(self, broker: str):
        ref = next(r for r in self.opts.stores if r.broker == broker)
        return open_live(ref, self.opts, self._tail(ref))

    def reportLatestOffset(self) -> Optional[dict]:
        """For the query's progress (``sources[].latestOffset``): the latest offsets the last trigger saw, and how
        far the query is behind them once its batch is read (:func:`backlog_lag`: messages, queues, bytes)."""
        if self._seen is None:
            return None
        latest, end = self._seen
        return backlog_lag(self._store, latest, end)

    def _earliest(self, broker: str, topic: str, qid: int) -> int:
        return self._store(broker).min_offset(topic, qid)

    # --- partitions ---------------------------------------------------------------------------------------

    def partitions(self, start: Offsets, end: Offsets):
        """The batch's queue ranges, packed: ranges of many small queues share a task up to
        ``maxMessagesPerPartition`` messages (a batch spread over thousands of queues is a few tasks, not one
        per queue). Only the queues with something to read are opened."""
        self._last_end = end  # on restart Spark re-plans its last batch first: later batches go on from here
        parts = []
        for ref in self.opts.stores:
            work = [(topic, qid, start.get(ref.broker, {}).get(topic, {}).get(qid), int(hi))
                    for topic, queues in end.get(ref.broker, {}).items() for qid, hi in queues.items()]
            work = [w for w in work if w[2] is None or int(w[2]) < w[3]]
            if not work:
                continue
            store = open_live(ref, self.opts, self._tail(ref))  # the cache's: not closed here
            handle = StoreHandle(ref.path, ref.broker, store.commitlog.queue.end_offset,
                                 handle_sizes(store.sizes), variant=store.variant.name,
                                 fs_options=ref.fs_options, settings=handle_settings(store))
            per_file = store.sizes.consume_queue_file_size // L.CQ_STORE_UNIT_SIZE
            losses = self._losses(ref, store)
            missing = bool(store.missing_commit_log_files())
            ranges, lost = [], []
            for topic, qid, lo, hi in work:
                if lo is None:
                    lo = self._history_first(store, topic, int(qid)) if store.has_queue(topic, qid) else hi
                tiered_parts, lo = self._tiered_part(ref, store, topic, int(qid), int(lo), hi)
                parts += tiered_parts
                lo = self._check_loss(store, ref, topic, int(qid), int(lo), hi)
                gone = losses.get((topic, int(qid)))
                if gone is None and missing and store.has_queue(topic, int(qid)):
                    # a live store's units into missing commit-log files: lost whoever writes the store
                    gone = [r for r in store.lost_ranges_of(store.consume_queue(topic, int(qid)))
                            if r.gap_end is not None]
                spans = [(lo, hi)]
                for r in gone or ():
                    if lo < r.end and r.start < hi:  # the batch needs lost messages: read around them
                        lost.append(r)
                        spans = [(a, min(b, r.start)) for a, b in spans] + [(max(a, r.end), b) for a, b in spans]
                        spans = sorted((a, b) for a, b in spans if a < b)
                ranges += [(topic, int(qid), a, b) for first, stop in spans if first < stop
                           for a, b in split_range(first, stop, per_file, self.opts.max_messages_per_partition)]
            report_lost(ref, lost, self.opts.fail_on_data_loss, STREAM_LOSS_ADVICE)
            parts += pack_ranges(handle, ranges, self.opts.max_messages_per_partition)
        return parts

    def _check_loss(self, store, ref, topic, qid, lo, hi) -> int:
        if not store.has_queue(topic, qid):
            return hi
        first = store.min_offset(topic, qid)
        if lo < first and lo < hi:
            message = (f"{ref.broker}/{topic}/{qid}: offsets {lo}..{min(first, hi)} were lost (commit-log files "
                       f"expired or the queue's min offset moved to {first}) before this query read them")
            if self.opts.fail_on_data_loss:
                raise DataLossError(message + "; restart from earliest or set failOnDataLoss=false to skip them")
            log.warning("%s; skipping them (failOnDataLoss=false)", message)
            return min(first, hi)
        return lo

    def read(self, partition):
        return self._batch.read(partition)

    def commit(self, end: Offsets) -> None:
        """Nothing to release: offsets live in Spark's checkpoint, the store is only read."""

    def stop(self) -> None:
        """Close the stores this stream kept open in the worker's cache."""
        self._available_now_target = None
        for ref in self.opts.stores:
            for lazy in (False, True):
                OPEN_STORES.drop(stream_key(ref, lazy))
