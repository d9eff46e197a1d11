"""Errors from the data source's methods shown with the shortest traceback Spark allows.

Spark reports an exception raised in a Python data source method as ``[PYTHON_DATA_SOURCE_ERROR] ...`` followed
by the Python traceback (Spark's own frames removed, the chain of causes dropped) and then the message. Raised
from deep inside option parsing or planning, the message came after a dozen frames of this package. At the
boundary, :func:`message_first` raises the same error again with no traceback of its own, so what Spark prints is
one frame (this wrapper, whose source line says to read on) and then the message.
"""

from __future__ import annotations

import functools

from ..errors import RocketStoreError


def message_first(method):
    """Decorate a data source method: a :class:`RocketStoreError` it raises reaches Spark right after one frame."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except RocketStoreError as e:
            error = e.with_traceback(None)
            error.__cause__, error.__suppress_context__ = None, True  # the message already names the cause
        raise error  # rocketstore: the next line says what is wrong and what to do

    return wrapper
