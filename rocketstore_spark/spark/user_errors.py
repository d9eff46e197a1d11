"""Errors from the data source's methods shown message first.

Spark reports an exception raised in a Python data source method as ``[PYTHON_DATA_SOURCE_ERROR] ...`` followed
by the Python traceback, whose last line is the message: with the frames of Spark's worker and of this package
before it, a user reads a page of code locations before learning which option was wrong. Python prints a chained
exception's cause before the exception itself, and an exception without a traceback as its message alone, so
:func:`message_first` raises a short exception *from* the package's own error stripped of its traceback: the
error's type and message become the first lines Spark prints, and the traceback that follows is that of one
frame of this package.
"""

from __future__ import annotations

import functools

from ..errors import RocketStoreError

SEE_ABOVE = "rocketstore: the error above says what was wrong and what to do"


class UserError(RocketStoreError):
    """Raised at the data source's boundary from the error that says what to do (its ``__cause__``)."""


def message_first(method):
    """Decorate a data source method: a :class:`RocketStoreError` it raises reaches Spark message first."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except UserError:
            raise
        except RocketStoreError as e:
            # the message already names the underlying cause (a JSON error, an OS error): the chain of causes and
            # the frames of the package are left out of what Spark prints, not out of the message
            e.__cause__, e.__suppress_context__ = None, True
            raise UserError(SEE_ABOVE) from e.with_traceback(None)

    return wrapper
