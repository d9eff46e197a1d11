"""The format layer: read and write Apache RocketMQ 5.x stores byte-exactly (stdlib, numpy, pyarrow only).

Never imports pyspark. Start with :class:`RocketStore`; everything the layers above use is exported here
from the facade module :mod:`.store`.
"""

from .store import *  # noqa: F401,F403 - the facade's public names
from .store import __all__  # noqa: F401
