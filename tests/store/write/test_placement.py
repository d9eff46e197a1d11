"""``place_records`` (CommitLog.doAppend's placement rule), checked as properties."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rocketstore_spark.errors import MessageValidationError
from rocketstore_spark.store.format import layout as L
from rocketstore_spark.store.write.placement import place_records

FILE = 4096


@settings(max_examples=200, deadline=None)
# a store's end always leaves room for a BLANK marker in its file (every record placed made sure of it)
@given(start=st.builds(lambda f, at: f * FILE + at, st.integers(0, 2),
                       st.integers(0, FILE - L.END_FILE_MIN_BLANK_LENGTH)),
       lengths=st.lists(st.integers(92, FILE - L.END_FILE_MIN_BLANK_LENGTH), min_size=1, max_size=60))
@example(start=FILE - L.END_FILE_MIN_BLANK_LENGTH, lengths=[92])  # nothing fits: the marker alone ends the file
def test_records_never_straddle_files_and_blanks_close_every_file_left(start, lengths):
    lengths = np.array(lengths, dtype=np.int64)
    p = place_records(start, lengths, FILE)
    ends = p.phy + lengths
    assert (p.phy // FILE == (ends - 1) // FILE).all()  # inside one file
    blanks = dict(p.blanks)
    pos = start
    for phy, length in zip(p.phy.tolist(), lengths.tolist()):
        if phy != pos:  # skipped to the next file: a BLANK marker took the rest of the previous one
            assert blanks.pop(pos) == phy - pos and phy % FILE == 0 and phy - pos >= L.END_FILE_MIN_BLANK_LENGTH
        assert FILE - phy % FILE - length >= L.END_FILE_MIN_BLANK_LENGTH  # room left for the marker
        pos = phy + length
    assert not blanks and p.end == pos


def test_placing_in_two_steps_equals_placing_at_once():
    lengths = np.random.default_rng(3).integers(92, 900, 400)
    whole = place_records(100, lengths, FILE)
    first = place_records(100, lengths[:137], FILE)
    second = place_records(first.end, lengths[137:], FILE)
    assert np.array_equal(whole.phy, np.concatenate([first.phy, second.phy]))
    assert whole.blanks == first.blanks + second.blanks and whole.end == second.end


def test_a_record_larger_than_a_file_is_refused():
    with pytest.raises(MessageValidationError, match="row 1: a 4090-byte record cannot fit"):
        place_records(0, np.array([100, 4090]), FILE)
