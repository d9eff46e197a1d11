"""Recovery of a store opened for writing: interrupted publications finished (past their commit point) or rolled
back, then a crashed tail repaired. Runs whenever a store is opened for writing, and as ``rocketstore recover``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..files.sizes import StoreSizes
from ..files.topic_config import register_topics, topics_path
from ..format import layout as L
from .cleanup import remove_closed_staging, remove_half_made_files
from .journal import STATE_DONE
from .repair import repair_store
from .rollback import discard_trash, rollback
from .sink_batches import record_sink_batch
from .store_meta import JOURNAL_DIR, meta_dir, remove_empty_dirs, staging_dir


def recover_store(root: Path, sizes: StoreSizes) -> list[str]:
    """Finish or roll back interrupted publications, then repair a crashed tail. Caller holds the lock.

    Returns what was done, one line per journal, for logs and ``rocketstore recover``.
    """
    sizes.require_index_sizes()  # rolling back or re-indexing rewrites index files: their layout must be known
    done = [f"removed {p}: a file whose creation a crash interrupted" for p in remove_half_made_files(root)]
    jdir = meta_dir(root) / JOURNAL_DIR
    for path in sorted(jdir.glob("*.json")) if jdir.is_dir() else []:
        payload = json.loads(path.read_text())
        job = payload["job"]
        if payload["state"] == STATE_DONE:
            discard_trash(root, job)
            if payload.get("sink"):
                record_sink_batch(root, *payload["sink"])
            added = register_topics(root, payload.get("register_topics") or {})
            done.append(f"job {job}: was committed; cleaned up" +
                        (f" (added topics {', '.join(added)} to {topics_path(root)})" if added else ""))
        else:
            rollback(root, sizes, payload)
            done.append(f"job {job}: was interrupted before its commit point; rolled back")
            (Path(root) / L.ABORT_FILE).unlink(missing_ok=True)
        shutil.rmtree(staging_dir(root, job), ignore_errors=True)
        path.unlink()
    done += remove_closed_staging(Path(root))
    if (Path(root) / L.ABORT_FILE).exists():
        end = repair_store(root, sizes)
        (Path(root) / L.ABORT_FILE).unlink()
        done.append(f"crashed tail repaired: commit log valid up to offset {end}")
    remove_empty_dirs(meta_dir(root))
    return done


__all__ = ["recover_store"]
