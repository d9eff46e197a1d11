"""The properties text the writer builds from the tags / keys / uniqKey columns, byte for byte: every non-null
value as ``NAME \\u0001 value \\u0002``, in the order TAGS, KEYS, UNIQ_KEY (``messageProperties2String`` over
the producer's map), with and without nulls (the writer joins rows without nulls in one pass)."""

import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.format.encoder import UniqKeyFactory
from rocketstore_spark.store.write.message_input import build_properties_known

VALUE = st.one_of(st.none(), st.text(alphabet="ab 中😀_-", max_size=8))


def expected(tags, keys, uniq) -> str:
    out = ""
    for name, value in ((L.PROPERTY_TAGS, tags), (L.PROPERTY_KEYS, keys or None), (L.PROPERTY_UNIQ_KEY, uniq)):
        if value is not None:
            out += f"{name}{L.NAME_VALUE_SEPARATOR}{value}{L.PROPERTY_SEPARATOR}"
    return out


@given(st.lists(st.tuples(VALUE, VALUE, VALUE), min_size=1, max_size=12))
@example([("TagA", "k1 k2", "UNIQ1"), ("TagB", "k3", "UNIQ2")])  # no nulls anywhere: the one-join path
@example([("TagA", None, "U"), (None, "", None)])
def test_properties_text_from_columns(rows):
    table = pa.table({"topic": ["t"] * len(rows), "body": [b"x"] * len(rows),
                      "tags": pa.array([r[0] for r in rows], pa.string()),
                      "keys": pa.array([r[1] for r in rows], pa.string()),
                      "uniqKey": pa.array([r[2] for r in rows], pa.string())})
    text, _ = build_properties_known(table, UniqKeyFactory(), 0)
    assert text.to_pylist() == [expected(*r) for r in rows]


def test_map_properties_come_first_and_generated_uniq_keys_last():
    table = pa.table({"topic": ["t", "t"], "body": [b"x", b"y"], "tags": ["A", "B"],
                      "keys": pa.array([["k1", "k2"], ["k3"]], pa.list_(pa.string())),
                      "properties": pa.array([[("p", "1")], []], pa.map_(pa.string(), pa.string()))})
    text, known = build_properties_known(table, UniqKeyFactory(), 1_700_000_000_000)
    rows = text.to_pylist()
    assert rows[0].startswith("p\u00011\u0002TAGS\u0001A\u0002KEYS\u0001k1 k2\u0002UNIQ_KEY\u0001")
    assert rows[1].startswith("TAGS\u0001B\u0002KEYS\u0001k3\u0002UNIQ_KEY\u0001")
    assert all(len(r.split("UNIQ_KEY\u0001")[1]) == 33 and r.endswith("\u0002") for r in rows)
    assert known is None  # a map may hold anything: the broker's parser decides
