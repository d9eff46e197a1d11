"""Follow a store with Structured Streaming and copy its messages to Parquet, exactly once.

    python examples/stream_to_parquet.py STORE_DIR OUTPUT_DIR CHECKPOINT_DIR [--available-now]

Runs until stopped (Ctrl-C); restart it with the same checkpoint to continue where it left off.
With --available-now it reads everything present at start, in bounded batches, then exits.
"""

import os
import sys

from pyspark.sql import SparkSession


def main(store, output, checkpoint, available_now=False):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
             .appName("rocketstore-stream").config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    messages = (spark.readStream.format("rocketstore")
                .option("startingOffsets", "earliest")
                .option("maxMessagesPerTrigger", "50000")
                .load(store)
                .selectExpr("topic", "queueId", "queueOffset", "tags", "keys", "CAST(body AS STRING) AS body",
                            "storeTimestamp"))
    writer = (messages.writeStream.format("parquet").option("path", output)
              .option("checkpointLocation", checkpoint).partitionBy("topic"))
    query = writer.trigger(availableNow=True).start() if available_now else \
        writer.trigger(processingTime="5 seconds").start()
    query.awaitTermination()
    rows = spark.read.parquet(output).count()
    print(f"{rows:,} messages in {output} after {len(query.recentProgress)} micro-batch(es)")
    spark.stop()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 3:
        sys.exit(__doc__)
    main(*args, available_now="--available-now" in sys.argv)
