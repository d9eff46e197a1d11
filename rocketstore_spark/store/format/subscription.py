"""Subscriptions: a RocketMQ tag expression (``*`` or tags joined by ``||``), parsed once, and the tests a
consume queue's units and the decoded records take against it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ... import _native
from ...errors import InvalidArgumentError
from . import layout as L
from .java_hash import java_string_hash

EXT_ADDRESS_MAX = -(1 << 31) - 1  # ConsumeQueueExt.MAX_ADDR: tagsCode at or below is an ext-file address


@dataclass(frozen=True)
class Subscription:
    """A RocketMQ subscription expression: ``*`` or tags joined by ``||``."""

    tags: tuple[str, ...]  # empty for "*"

    @property
    def is_all(self) -> bool:
        return not self.tags

    @cached_property
    def codes(self) -> np.ndarray:
        """Java hash codes of the subscribed tags (what ``SubscriptionData.codeSet`` holds); computed once, a
        read over thousands of queues asks for every queue."""
        return np.array([java_string_hash(t) for t in self.tags], dtype=np.int64)

    @staticmethod
    def parse(expression) -> "Subscription":
        """Parse ``"*"``, ``None`` (all), ``"TagA || TagB"`` or a list of tags; malformed text is an error."""
        if expression is None:
            return Subscription(())
        if isinstance(expression, (list, tuple)):
            parts = [str(t).strip() for t in expression]
        else:
            text = str(expression).strip()
            if text in ("", "*"):
                return Subscription(())
            parts = [t.strip() for t in text.split("||")]
        if any(not t or t == "*" or "|" in t for t in parts):
            raise InvalidArgumentError(
                f"bad tag expression {expression!r}: expected '*' or tags separated by '||', "
                "e.g. 'TagA || TagB' (empty tags, '*' inside a list and single '|' are not allowed)")
        return Subscription(tuple(dict.fromkeys(parts)))

    def matches_codes(self, tags_codes: np.ndarray, topic: str = "") -> np.ndarray:
        """The consume-queue test: ``(int) tagsCode`` in the code set (everything for ``*``).

        Units whose tagsCode is not a tag hash pass, to be decided on the real tag: ConsumeQueueExt addresses
        (<= Integer.MIN_VALUE - 1) and every unit of SCHEDULE_TOPIC_XXXX (its tagsCode is a delivery time).
        """
        codes = np.asarray(tags_codes, dtype=np.int64)
        if self.is_all or topic == L.SCHEDULE_TOPIC:
            return np.ones(len(codes), dtype=bool)
        low = (codes & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        return np.isin(low.astype(np.int64), self.codes) | (codes <= EXT_ADDRESS_MAX)

    def matches_units(self, units: np.ndarray, topic: str = "") -> np.ndarray:
        """:meth:`matches_codes` for consume-queue units, tested in place by one native pass (a selective read
        tests every unit of a queue)."""
        if self.is_all or topic == L.SCHEDULE_TOPIC:
            return np.ones(len(units), dtype=bool)
        hit = np.empty(len(units), dtype=np.uint8)
        _native.units_matching_tags(L.unit_bytes(units), np.ascontiguousarray(self.codes, dtype=np.int32), hit)
        return hit.view(bool)
