"""Option mistakes are errors at load() (or at the first plan) that say what to do, and Spark shows rocketstore's
message before any traceback; typos never read nothing or everything silently."""

import pytest

from rocketstore_spark.errors import InvalidArgumentError
from rocketstore_spark.spark.options import parse_read_options

pytestmark = pytest.mark.spark


def reader(spark, path, **options):
    r = spark.read.format("rocketstore")
    for k, v in options.items():
        r = r.option(k, v)
    return r.load(str(path))


def failure(action) -> str:
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


def assert_message_comes_first(text: str, message: str) -> None:
    """At most one frame (the data source's boundary) between Spark's error class and rocketstore's message."""
    before = text[:text.index(message)]
    assert before.count('File "') <= 1, before
    assert "options.py" not in before and "planning.py" not in before, before


def test_a_misspelled_option_names_the_close_match_before_any_traceback(spark, sample_store):
    text = failure(lambda: reader(spark, sample_store, topcs="orders"))
    assert "did you mean 'topics'" in text
    assert_message_comes_first(text, "unknown option 'topcs'")


def test_an_unknown_topic_is_an_error_listing_the_topics(spark, sample_store):
    text = failure(lambda: reader(spark, sample_store, topics="ordrs").count())
    assert "no topic 'ordrs'" in text and "did you mean 'orders'" in text and "payments" in text
    assert_message_comes_first(text, "no topic 'ordrs'")


def test_offsets_naming_an_unknown_topic_or_queue_are_errors(spark, sample_store):
    text = failure(lambda: reader(spark, sample_store, startingOffsets='{"ordrs": {"0": 1}}').count())
    assert "startingOffsets" in text and "did you mean 'orders'" in text
    text = failure(lambda: reader(spark, sample_store, endingOffsets='{"orders": {"77": 1}}').count())
    assert "has no queue 77" in text


def test_starting_after_ending_timestamp_is_an_error(sample_store):
    with pytest.raises(InvalidArgumentError, match="is not before endingTimestamp"):
        parse_read_options({"path": str(sample_store), "startingTimestamp": "2024-06-02T00:00:00Z",
                            "endingTimestamp": "2024-06-01T00:00:00Z"})


def test_timestamps_take_iso_8601_and_epoch_ms(spark, sample_store):
    iso = reader(spark, sample_store, startingTimestamp="2000-01-01T00:00:00Z").count()
    ms = reader(spark, sample_store, startingTimestamp=str(946684800000)).count()
    local = reader(spark, sample_store, startingTimestamp="2000-01-01T00:00:00").count()
    assert iso == ms == local > 0
    assert "ISO 8601" in failure(lambda: reader(spark, sample_store, startingTimestamp="yesterday"))


def test_tags_star_reads_every_tag(spark, sample_store):
    assert reader(spark, sample_store, tags="*").count() == reader(spark, sample_store).count() > 0
