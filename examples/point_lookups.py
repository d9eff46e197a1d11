"""Point lookups by key, UNIQ_KEY and msgId: with the store API (no Spark) and through Spark's pushdown.

    python examples/point_lookups.py STORE_DIR TOPIC KEY
"""

import os
import sys

from rocketstore_spark.store import RocketStore

MAX_RESULTS = 10_000


def main(store, topic, key):
    with RocketStore.open(store) as s:
        # a broker answers at most 64 messages per key query; ask for more, the library lifts the cap
        hits = s.query_by_key(topic, key, max_num=MAX_RESULTS,
                              columns=["msgId", "uniqKey", "queueId", "queueOffset", "body"])
        cut = " (the limit: there may be more)" if hits.num_rows >= MAX_RESULTS else ""
        print(f"key {key!r} in {topic}: {hits.num_rows} message(s){cut}")
        if not hits.num_rows:
            return
        first = hits.to_pylist()[0]
        by_id = s.look_message_by_msg_id(first["msgId"])
        print(f"msgId {first['msgId']} -> queue {by_id['queueId']} offset {by_id['queueOffset']}")
        by_uniq = s.query_by_key(topic, first["uniqKey"], columns=["msgId"])
        print(f"UNIQ_KEY {first['uniqKey']} -> {by_uniq.column(0).to_pylist()}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
             .config("spark.sql.python.filterPushdown.enabled", "true")  # uniqKey = / msgId = use the index
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.format("rocketstore").load(store)
    rows = df.where(df.uniqKey == first["uniqKey"]).select("topic", "queueId", "queueOffset", "msgId").collect()
    print(f"Spark, uniqKey pushdown: {[r.asDict() for r in rows]}")
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
