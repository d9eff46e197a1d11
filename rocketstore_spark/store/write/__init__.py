"""Writing a store: input preparation, encoded batches, placement, the per-file writers, the appender, and the
Spark sink's job protocol (reservation, staging, journal, publish, repair). Imports the folders below it."""
