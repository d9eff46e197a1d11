"""Property tests: hashes continued from a prefix's hash (how the writer hashes ``topic#key`` index keys without
building the strings), over UTF-16 code units."""

import numpy as np
import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from rocketstore_spark.store.format.java_hash import java_string_hashes
from tests.store import reference as ref

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
LONG_ASCII = st.text(alphabet="abcXYZ09_-#%|", max_size=400)


@given(st.lists(st.tuples(st.one_of(TEXT, LONG_ASCII), st.one_of(TEXT, LONG_ASCII)), max_size=25))
@example([("TopicTest#", "order-42"), ("", ""), ("a", ""), ("", "😀"), ("é#", "中😀x"), ("T#", "a" * 1000)])
@example([("polygenelubricants", ""), ("", "polygenelubricants"), ("polygene", "lubricants")])
def test_hash_of_a_concatenation_from_the_prefix_hash(pairs):
    prefixes = [a for a, _ in pairs]
    suffixes = [b for _, b in pairs]
    got = java_string_hashes(suffixes, seeds=java_string_hashes(prefixes))
    assert got.dtype == np.int64
    assert got.tolist() == [ref.java_string_hash(a + b) for a, b in pairs]


@given(st.lists(st.one_of(st.none(), TEXT, LONG_ASCII), max_size=30))
@example([None, "", "😀", "a😀", "\U0010FFFF", "é"])
def test_supplementary_characters_hash_as_surrogates_and_nulls_as_empty(values):
    hashes = java_string_hashes(pa.array(values, pa.string()))
    assert hashes.tolist() == [ref.java_string_hash(v or "") for v in values]


def test_seeds_of_the_wrong_length_are_refused():
    import pytest

    with pytest.raises(ValueError, match="seeds"):
        java_string_hashes(["a", "b"], seeds=np.zeros(3, np.int64))
