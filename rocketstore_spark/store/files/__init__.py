"""One module per on-disk file kind (mapped file queue, commit log, consume queue, index file, checkpoint,
broker topic table, lock) and the size detection over them. Imports only :mod:`..format`."""
