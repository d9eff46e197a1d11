"""Every kind of consume queue answers the whole consume-queue interface, with the same signatures: the readers
above call any of them alike (a method missing from one kind surfaced only when a fuzzed RocksDB store's ordered
scan asked it for a record start)."""

import inspect

import pytest

from rocketstore_spark.store.files.batch_consume_queue import BatchConsumeQueue
from rocketstore_spark.store.files.consume_queue import ConsumeQueue
from rocketstore_spark.store.files.queue_protocol import ConsumeQueueProtocol
from rocketstore_spark.store.files.rocksdb_consume_queue import RocksDBConsumeQueue

METHODS = sorted(name for name, member in vars(ConsumeQueueProtocol).items()
                 if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)))


def parameters(fn) -> list:
    return [(p.name, p.default is not inspect.Parameter.empty) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("kind", [ConsumeQueue, BatchConsumeQueue, RocksDBConsumeQueue], ids=lambda k: k.__name__)
def test_each_kind_answers_every_method_of_the_interface(kind):
    assert {"first_at_or_past", "units", "first_offset", "max_offset", "phy_offsets_between"} <= set(METHODS)
    for name in METHODS:
        wanted = vars(ConsumeQueueProtocol)[name]
        found = inspect.getattr_static(kind, name, None)
        if isinstance(wanted, property):  # a property, or an attribute its instances set
            assert isinstance(found, property) or f"self.{name} =" in inspect.getsource(kind), \
                f"{kind.__name__} lacks {name}"
            continue
        assert callable(found), f"{kind.__name__} lacks {name}"
        # the same parameter names in order; every parameter the interface gives a default has one here too
        want, have = parameters(wanted), parameters(found)
        assert [n for n, _ in have[:len(want)]] == [n for n, _ in want], (kind.__name__, name, have)
        assert all(h for (_, w), (_, h) in zip(want, have) if w), (kind.__name__, name, have)
        assert all(d for _, d in have[len(want):]), (kind.__name__, name, have)  # extras are optional
