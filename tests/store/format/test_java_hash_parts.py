"""Property tests: hashes of concatenations built from their parts (how the writer hashes ``topic#key``
index keys without building the strings), and UTF-16 lengths."""

import numpy as np
import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from rocketstore_spark.store.format.java_hash import concat_hashes, java_hashes_and_lengths
from tests.store import reference as ref

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
LONG_ASCII = st.text(alphabet="abcXYZ09_-#%|", max_size=400)


@given(st.lists(st.tuples(st.one_of(TEXT, LONG_ASCII), st.one_of(TEXT, LONG_ASCII)), max_size=25))
@example([("TopicTest#", "order-42"), ("", ""), ("a", ""), ("", "😀"), ("é#", "中😀x"), ("T#", "a" * 1000)])
@example([("polygenelubricants", ""), ("", "polygenelubricants"), ("polygene", "lubricants")])
def test_hash_of_a_concatenation_from_its_parts(pairs):
    prefixes = [a for a, _ in pairs]
    suffixes = [b for _, b in pairs]
    prefix_hash, _ = java_hashes_and_lengths(prefixes)
    suffix_hash, suffix_len = java_hashes_and_lengths(suffixes)
    got = concat_hashes(prefix_hash, suffix_hash, suffix_len)
    assert got.dtype == np.int64
    assert got.tolist() == [ref.java_string_hash(a + b) for a, b in pairs]


@given(st.lists(st.one_of(st.none(), TEXT, LONG_ASCII), max_size=30))
@example([None, "", "😀", "a😀", "\U0010FFFF", "é"])
def test_lengths_are_utf16_code_units_and_nulls_hash_as_empty(values):
    hashes, lengths = java_hashes_and_lengths(pa.array(values, pa.string()))
    assert lengths.tolist() == [len((v or "").encode("utf-16-be")) // 2 for v in values]
    assert hashes.tolist() == [ref.java_string_hash(v or "") for v in values]
