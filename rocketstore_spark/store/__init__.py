"""The format layer: read and write Apache RocketMQ 5.x stores byte-exactly (stdlib, numpy, pyarrow only).

Never imports pyspark. Start with :class:`RocketStore`.
"""

from .columns import COLUMNS, RAW_COLUMNS, arrow_schema
from .consume_queue import Subscription
from .messages import GetMessageResult
from .sizes import StoreSizes
from .store import DEFAULT_BATCH_ROWS, RocketStore

__all__ = ["RocketStore", "DEFAULT_BATCH_ROWS", "StoreSizes", "Subscription", "GetMessageResult", "COLUMNS",
           "RAW_COLUMNS", "arrow_schema"]
