"""Byte layouts and constants, record parsing and encoding, Java hashes and the column model: what one record
or one unit looks like, independent of any file. Imports nothing else of the store."""
