"""Migrate one topic's messages between stores with a tag filter, preserving store timestamps.

    python examples/migrate_topic.py SOURCE_STORE TARGET_STORE TOPIC [TAG_EXPRESSION]

Read → filter → write: the target store gets the messages with their bodies, keys, tags, properties and
store timestamps; queue and commit-log offsets are assigned by the target (dense per queue).
"""

import os
import sys

from pyspark.sql import SparkSession


def main(source, target, topic, tags="*"):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
             .appName("rocketstore-migrate").config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    messages = (spark.read.format("rocketstore").option("topics", topic).option("tags", tags).load(source))
    count = messages.count()
    (messages.write.format("rocketstore").mode("append")
     .option("queueNums", "4")  # for a new topic in the target
     .save(target))
    copied = spark.read.format("rocketstore").option("topics", topic).load(target).count()
    print(f"migrated {count:,} messages of {topic} (tags {tags!r}); the target now holds {copied:,}")
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    main(*sys.argv[1:])
