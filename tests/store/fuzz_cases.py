"""A seeded fuzz campaign over damaged copies of real stores: the engine.

One *case* is one integer seed. It picks a mutation of a pristine store (a bit flip or byte run in a commit-log
header field or body, a consume-queue unit, an index header/slot/entry, the checkpoint; a truncation, a torn
tail, a zero-length, garbage or stray file, a deleted file), applies it to a hard-linked copy (only the touched
file is really copied), and runs every read operation on it in a child process capped in wall-clock time and
address space. Each operation must succeed or raise a ``RocketStoreError`` that names a file or an offset; a
single-bit flip in a record body must be caught by the CRC check. The same seed always makes the same case.

    python tests/store/fuzz_cases.py child STORE EXPECT_JSON   (what the parent runs in the subprocess)

The parent side is :func:`run_case`; the campaign runners are ``tests/store/test_fuzz.py`` and
``bench/fuzz.py``. This module imports the package only in the child, so a parent stays small.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import struct
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

MESSAGE_MAGICS = {0xDAA320A7: 1, 0xDAA320AB: 2}
# A DLedger log (dledger-<id>/data/): entries of a 48-byte header (magic 1, size, index, term, pos, channel,
# chain CRC, body CRC, body length) around one record each
DLEDGER_PREFIX = "dledger-"
DLEDGER_MAGIC = 1
DLEDGER_HEADER = 48
DLEDGER_FIELDS = (("magic", 0, 4), ("size", 4, 4), ("index", 8, 8), ("term", 16, 8), ("pos", 24, 8),
                  ("channel", 32, 4), ("chainCrc", 36, 4), ("bodyCrc", 40, 4), ("bodyLength", 44, 4))
INDEX_HEADER = 40
CQ_UNIT = 20
DEFAULT_TIMEOUT_S = 120
DEFAULT_MEMORY_BYTES = 3 << 30  # pyarrow and numpy reserve some address space at import; reads need far less
INTERESTING = (b"\x00", b"\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x01")


# --- the pristine store, catalogued without the package (an independent walk) -----------------------------

def record_fields(data: bytes, pos: int, version: int) -> dict:
    """name → (start, length) in the file of every field of the record at ``pos`` (MessageExtEncoder order)."""
    sysflag = struct.unpack_from(">i", data, pos + 36)[0]
    born, store = (20 if sysflag & 0x10 else 8), (20 if sysflag & 0x20 else 8)
    spans, at = {}, pos
    for name, width in (("TOTALSIZE", 4), ("MAGICCODE", 4), ("BODYCRC", 4), ("QUEUEID", 4), ("FLAG", 4),
                        ("QUEUEOFFSET", 8), ("PHYSICALOFFSET", 8), ("SYSFLAG", 4), ("BORNTIMESTAMP", 8),
                        ("BORNHOST", born), ("STORETIMESTAMP", 8), ("STOREHOST", store), ("RECONSUMETIMES", 4),
                        ("PREPAREDTRANSACTIONOFFSET", 8), ("BODYLENGTH", 4)):
        spans[name] = (at, width)
        at += width
    body_len = struct.unpack_from(">i", data, at - 4)[0]
    spans["BODY"] = (at, body_len)
    at += body_len
    width = 2 if version == 2 else 1
    spans["TOPICLENGTH"] = (at, width)
    topic_len = int.from_bytes(data[at:at + width], "big")
    spans["TOPIC"] = (at + width, topic_len)
    at += width + topic_len
    spans["PROPERTIESLENGTH"] = (at, 2)
    spans["PROPERTIES"] = (at + 2, struct.unpack_from(">h", data, at)[0])
    return spans


@dataclass
class Catalogue:
    """Where things are in a pristine store: records and their fields, written units, index entries."""

    root: Path
    records: list = field(default_factory=list)  # (relative file, record position, field spans)
    cq_units: list = field(default_factory=list)  # (relative file, unit position)
    index_files: list = field(default_factory=list)  # (relative file, entry count)
    dledger_entries: list = field(default_factory=list)  # (relative file, entry position) in a DLedger log
    files: list = field(default_factory=list)  # every file, relative
    index_slots: Optional[int] = None


@lru_cache(maxsize=8)
def catalogue(root: Path) -> Catalogue:
    root = Path(root)
    cat = Catalogue(root)
    cat.files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    for rel in (f for f in cat.files if f.startswith("commitlog/")):
        data = (root / rel).read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic not in MESSAGE_MAGICS or total <= 0 or pos + total > len(data):
                break
            cat.records.append((rel, pos, record_fields(data, pos, MESSAGE_MAGICS[magic])))
            pos += total
    for rel in (f for f in cat.files if f.startswith(DLEDGER_PREFIX) and "/data/" in f):
        data = (root / rel).read_bytes()
        pos = 0
        while pos + DLEDGER_HEADER <= len(data):  # a DLedger entry: a 48-byte header, then one record
            magic, size = struct.unpack_from(">ii", data, pos)
            if magic != DLEDGER_MAGIC or size <= DLEDGER_HEADER or pos + size > len(data):
                break
            total, record_magic = struct.unpack_from(">iI", data, pos + DLEDGER_HEADER)
            if record_magic in MESSAGE_MAGICS and total > 0:
                cat.records.append((rel, pos + DLEDGER_HEADER,
                                    record_fields(data, pos + DLEDGER_HEADER, MESSAGE_MAGICS[record_magic])))
            cat.dledger_entries.append((rel, pos))
            pos += size
    for rel in (f for f in cat.files if f.startswith("consumequeue/")):
        data = (root / rel).read_bytes()
        cat.cq_units += [(rel, p) for p in range(0, len(data) - CQ_UNIT + 1, CQ_UNIT)
                         if struct.unpack_from(">i", data, p + 8)[0] > 0][::7]  # a sample keeps it small
    for rel in (f for f in cat.files if f.startswith("index/")):
        with open(root / rel, "rb") as fh:
            cat.index_files.append((rel, struct.unpack(">i", fh.read(INDEX_HEADER)[36:40])[0]))
    args = root.parent / "sizes.args"
    if args.is_file():
        words = args.read_text().split()
        cat.index_slots = int(dict(zip(words[::2], words[1::2])).get("--index-slots", 0)) or None
    return cat


# --- mutations -------------------------------------------------------------------------------------------

def link_or_copy(src, dst) -> None:
    """Hard-link (cheap: a case damages one file, made private by :func:`own`); copy across file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def own(path: Path) -> bytearray:
    """The bytes of ``path``, made private to the copy (the copy is hard-linked to the pristine store)."""
    data = bytearray(path.read_bytes())
    path.unlink()
    path.write_bytes(bytes(data))
    return data


def damage(rng: random.Random, path: Path, start: int, length: int, how: Optional[str] = None) -> dict:
    """Overwrite part of ``[start, start + length)`` of ``path``: one bit, random bytes, or a fixed pattern."""
    data = own(path)
    length = max(1, min(length, len(data) - start))
    how = how or rng.choice(("bit", "bit", "random", "pattern"))
    if how == "bit":
        at = start + rng.randrange(length)
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        detail = {"at": at, "bit": bit}
    else:
        run = rng.randint(1, length)
        at = start + rng.randrange(length - run + 1)
        pattern = rng.choice(INTERESTING)
        new = bytes(rng.randrange(256) for _ in range(run)) if how == "random" else (pattern * run)[:run]
        detail = {"at": at, "run": run}
        if data[at:at + run] == new:  # the bytes were already that: a case must change something
            new = bytes([new[0] ^ (1 << rng.randrange(8))]) + new[1:]
            detail["changed_first_bit"] = True
        data[at:at + run] = new
    path.write_bytes(bytes(data))
    return {"file": str(path), "how": how, **detail}


def m_record_field(rng, cat, copy):
    if cat.dledger_entries and rng.random() < 0.3:  # a DLedger store: the entry header around the record too
        rel, pos = rng.choice(cat.dledger_entries)
        name, start, width = rng.choice(DLEDGER_FIELDS)
        return {"field": f"dledger {name}", "entry": pos, **damage(rng, copy / rel, pos + start, width)}
    rel, pos, spans = rng.choice(cat.records)
    name = rng.choice([n for n, (_s, w) in spans.items() if w > 0])
    return {"field": name, "record": pos, **damage(rng, copy / rel, *spans[name])}


def m_body_bit_flip(rng, cat, copy):
    rel, pos, spans = rng.choice([r for r in cat.records if r[2]["BODY"][1] > 0])
    out = {"field": "BODY", "record": pos, **damage(rng, copy / rel, *spans["BODY"], how="bit")}
    return {**out, "expect_crc": {"file": str(copy / rel), "record": pos}}


def m_body_run(rng, cat, copy):
    rel, pos, spans = rng.choice([r for r in cat.records if r[2]["BODY"][1] > 0])
    return {"field": "BODY", "record": pos, **damage(rng, copy / rel, *spans["BODY"], how="random")}


def m_cq_unit(rng, cat, copy):
    rel, pos = rng.choice(cat.cq_units)
    start, width = rng.choice(((0, 8), (8, 4), (12, 8)))
    return {"unit": pos // CQ_UNIT, **damage(rng, copy / rel, pos + start, width)}


def m_index(rng, cat, copy):
    rel, count = rng.choice(cat.index_files)
    part = rng.choice(("header", "slot", "entry"))
    if part == "header" or cat.index_slots is None or count <= 1:
        return {"part": "header", **damage(rng, copy / rel, rng.choice((0, 8, 16, 24, 32, 36)), 8)}
    entries = INDEX_HEADER + cat.index_slots * 4
    if part == "slot":
        return {"part": part, **damage(rng, copy / rel, INDEX_HEADER + 4 * rng.randrange(cat.index_slots), 4)}
    return {"part": part, **damage(rng, copy / rel, entries + 20 * rng.randrange(1, count), 20)}


def m_checkpoint(rng, cat, copy):
    return damage(rng, copy / "checkpoint", 8 * rng.randrange(5), 8)


def _any_file(rng, cat, kinds=("commitlog/", "consumequeue/", "index/", "checkpoint", DLEDGER_PREFIX)):
    return rng.choice([f for f in cat.files if f.startswith(kinds)])


def m_truncate(rng, cat, copy):
    path = copy / _any_file(rng, cat)
    data = own(path)
    keep = rng.choice((0, rng.randrange(len(data) or 1), len(data) // 2, max(len(data) - 1, 0)))
    path.write_bytes(bytes(data[:keep]))
    return {"file": str(path), "truncated_to": keep}


def m_torn_tail(rng, cat, copy):
    rel, pos, spans = cat.records[-rng.randint(1, min(200, len(cat.records)))]
    path = copy / rel
    data = own(path)
    total = struct.unpack_from(">i", data, pos)[0]
    start = min(pos + rng.randrange(total), len(data) - 1)  # from somewhere inside one of the last records
    data[start:] = bytes(len(data) - start)
    path.write_bytes(bytes(data))
    return {"file": str(path), "zeroed_from": start}


def m_random_bytes(rng, cat, copy):
    rel = _any_file(rng, cat)
    size = (copy / rel).stat().st_size
    if size == 0:
        return {"file": str(copy / rel), "how": "nothing (empty file)"}
    return damage(rng, copy / rel, rng.randrange(size), rng.randint(1, 4096), how="random")


STRAY_NAMES = ("garbage.bin", "{name}~", "{name}.bak", ".nfs0000000000a1b2c3", ".{name}.tmp", "{next}", "README",
               "{digits}")


def m_stray_file(rng, cat, copy):
    rel = _any_file(rng, cat, ("commitlog/", "consumequeue/", "index/", DLEDGER_PREFIX))
    directory = (copy / rel).parent
    name = Path(rel).name
    nxt = f"{int(name) + (copy / rel).stat().st_size:0{len(name)}d}" if name.isdigit() else "x"
    new = rng.choice(STRAY_NAMES).format(name=name, next=nxt, digits=f"{rng.randrange(10 ** 12)}")
    target = directory / new
    if target.exists():
        return {"file": str(target), "how": "nothing (name taken)"}
    size = rng.choice((0, 1, 17, 4096, (copy / rel).stat().st_size))
    target.write_bytes(bytes(rng.randrange(256) for _ in range(min(size, 64))) + bytes(max(size - 64, 0)))
    if rng.random() < 0.15:  # a stray directory instead
        target.unlink()
        target.mkdir()
    return {"file": str(target), "stray_bytes": size}


def m_delete_file(rng, cat, copy):
    rel = _any_file(rng, cat)
    (copy / rel).unlink()
    return {"file": str(copy / rel), "deleted": True}


def m_abnormal(rng, cat, copy):
    """An ``abort`` file (the broker did not shut down cleanly: abnormal recovery from the checkpoint, index
    files newer than it dropped, re-dispatch) on top of another kind of damage."""
    (copy / "abort").write_text("12345")
    names = sorted(n for n in MUTATIONS if n != "abnormal")
    kind = rng.choices(names, weights=[MUTATIONS[n][1] for n in names])[0]
    return {"with": kind, **MUTATIONS[kind][0](rng, cat, copy)}


MUTATIONS = {"abnormal": (m_abnormal, 3), "record_field": (m_record_field, 6), "body_bit_flip": (m_body_bit_flip, 3),
             "body_run": (m_body_run, 1), "cq_unit": (m_cq_unit, 3), "index": (m_index, 3),
             "checkpoint": (m_checkpoint, 1), "truncate": (m_truncate, 2), "torn_tail": (m_torn_tail, 1),
             "random_bytes": (m_random_bytes, 2), "stray_file": (m_stray_file, 2), "delete_file": (m_delete_file, 1)}


def case_kind(rng: random.Random) -> str:
    """The first draw of a case: which kind of damage (weighted towards the many header fields)."""
    names = sorted(MUTATIONS)
    return rng.choices(names, weights=[MUTATIONS[n][1] for n in names])[0]


def make_case(seed: int, source: Path, work: Path) -> tuple[Path, dict]:
    """A damaged copy of ``source`` under ``work`` for case ``seed``, and what was done to it."""
    rng = random.Random(seed)
    kind = case_kind(rng)
    cat = catalogue(Path(source).resolve())
    copy = Path(work) / "store"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(cat.root, copy, copy_function=link_or_copy)
    return copy, {"seed": seed, "kind": kind, **MUTATIONS[kind][0](rng, cat, copy)}


# --- running a case --------------------------------------------------------------------------------------

@dataclass
class CaseResult:
    seed: int
    mutation: dict
    outcomes: list  # (operation, "ok" | "error" | failure kind, detail)
    failures: list  # human-readable reasons this case fails

    def report(self) -> str:
        lines = [f"fuzz case seed={self.seed} ({self.mutation.get('kind')}) failed — rerun: "
                 f"python bench/fuzz.py --case-seed {self.seed}", f"  mutation: {json.dumps(self.mutation)}"]
        return "\n".join(lines + [f"  {f}" for f in self.failures])


def _limits(memory_bytes: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    return apply


def run_case(seed: int, source: Path, work: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
             memory_bytes: int = DEFAULT_MEMORY_BYTES, spark: bool = False) -> CaseResult:
    """Make case ``seed`` and run its operations in a capped child process."""
    copy, mutation = make_case(seed, source, work)
    expect = {"crc": mutation.get("expect_crc"), "spark": spark}
    cmd = [sys.executable, str(Path(__file__).resolve()), "child", str(copy), json.dumps(expect)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                             preexec_fn=_limits(memory_bytes))
    except subprocess.TimeoutExpired:
        return CaseResult(seed, mutation, [], [f"hung: no answer within {timeout_s} s"])
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout)[-2000:]
        return CaseResult(seed, mutation, [], [f"child died (exit {out.returncode}): {tail}"])
    answer = json.loads(lines[-1])
    failures = [f"{op}: {kind}: {detail}" for op, kind, detail in answer["outcomes"] if kind not in ("ok", "error")]
    if expect["crc"] and not answer["crc_detected"]:
        failures.append(f"single-bit body flip not caught by verifyCrc: {expect['crc']}")
    return CaseResult(seed, mutation, answer["outcomes"], failures)


def case_seeds(seed: int, cases: int) -> list[int]:
    """The case seeds of a campaign: the same campaign seed always gives the same cases."""
    rng = random.Random(seed)
    return [rng.randrange(1 << 40) for _ in range(cases)]


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "child":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fuzz_child import run_operations  # noqa: E402

    try:
        print(json.dumps(run_operations(Path(sys.argv[2]), json.loads(sys.argv[3]))))
    except BaseException:  # the harness itself must never hide a failure: the parent reports the traceback
        traceback.print_exc()
        sys.exit(3)
