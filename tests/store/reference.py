"""Independent reference implementations used by the store tests (deliberately naive, written from the Java).

Nothing here imports the package: these are what the package is checked against.
"""

from __future__ import annotations

import hashlib

MASK32 = 0xFFFFFFFF
SUBSCRIBE_ALL = "*"


def to_signed32(h: int) -> int:
    h &= MASK32
    return h - (1 << 32) if h >= 1 << 31 else h


def utf16_units(text: str) -> list[int]:
    """Java's chars: code points above U+FFFF become a surrogate pair."""
    units = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    return units


def java_string_hash(text: str) -> int:
    """``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 units, as a signed int."""
    h = 0
    for unit in utf16_units(text):
        h = (31 * h + unit) & MASK32
    return to_signed32(h)


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``Math.abs(hashCode)``; Integer.MIN_VALUE (whose abs overflows) -> 0."""
    h = abs(java_string_hash(key))
    return 0 if h >= 1 << 31 else h


def java_properties(text: str) -> dict:
    """``MessageDecoder.string2messageProperties`` (RocketMQ 5.3.3) transcribed character by character.

    Split on U+0002; a pair is kept only when its first U+0001 is at p with 0 < p < len(segment) - 1
    (non-empty name and value); a later duplicate overwrites (``HashMap.put``).
    """
    out = {}
    for segment in text.split("\u0002"):
        p = segment.find("\u0001")
        if 0 < p < len(segment) - 1:
            out[segment[:p]] = segment[p + 1:]
    return out


def keys_tokens(keys_value) -> list:
    """KEYS property -> its non-empty space-separated tokens ([] when absent)."""
    return [t for t in (keys_value or "").split(" ") if t]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def colliding_variant(text: str, at: int = 0) -> str:
    """A different string with the same Java hash: (c1, c2) -> (c1 + 1, c2 - 31) at positions at, at+1."""
    c1, c2 = ord(text[at]), ord(text[at + 1])
    assert c2 >= 31 and c1 + 1 < 0xD800, "pick a position whose second char is >= U+001F"
    return text[:at] + chr(c1 + 1) + chr(c2 - 31) + text[at + 2:]


# --- record layout, computed from a manifest entry (``MessageExtEncoder.encode`` order) -------------------------

def record_layout(m: dict) -> dict:
    """Byte positions (relative to the record start) of the variable fields of manifest record ``m``."""
    born_len = 20 if m["sysFlag"] & 0x10 else 8
    store_len = 20 if m["sysFlag"] & 0x20 else 8
    body_len_pos = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_len + 8 + store_len + 4 + 8
    body_pos = body_len_pos + 4
    topic_len_pos = body_pos + m["bodyLength"]
    topic_len_width = 2 if m["msgVersion"] == "V2" else 1
    topic_pos = topic_len_pos + topic_len_width
    props_len_pos = topic_pos + len(m["topic"].encode("utf-8"))
    props_pos = props_len_pos + 2
    assert props_pos + len(m["propertiesString"].encode("utf-8")) == m["storeSize"], m["commitLogOffset"]
    return {"body_len_pos": body_len_pos, "body_pos": body_pos, "topic_len_pos": topic_len_pos,
            "topic_pos": topic_pos, "props_len_pos": props_len_pos, "props_pos": props_pos,
            "store_ts_pos": 48 + born_len}


def commitlog_file_of(offset: int, file_size: int) -> tuple[str, int]:
    """(20-digit file name, position in that file) of absolute commit-log ``offset``."""
    start = offset - offset % file_size
    return f"{start:020d}", offset - start
