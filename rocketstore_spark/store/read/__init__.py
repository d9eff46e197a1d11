"""Reading a store as the broker does: recovery, the read engine, queue reads, lookups, time search and
verification. Imports only :mod:`..format` and :mod:`..files`."""
