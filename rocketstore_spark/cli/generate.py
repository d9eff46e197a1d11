"""``rocketstore generate``: sample stores for trying things out, the demo, the tests and the benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import InvalidArgumentError
from .common import COMMIT_LOG_SIZE, CONSUME_QUEUE_SIZE, INDEX_ENTRIES, INDEX_SLOTS, console, progress_bar, sizes_given


def generate(store: Path = typer.Argument(..., metavar="STORE", help="store directory to create or append to"),
             messages: int = typer.Option(100_000, help="number of messages"),
             days: float = typer.Option(3.0, help="store times spread over this many days, ending now"),
             seed: int = typer.Option(42, help="random seed"),
             body_bytes: Optional[int] = typer.Option(None, help="fixed body size (mixed sizes by default)"),
             topics: Optional[int] = typer.Option(None, help="a production-shaped store: this many topics with "
                                                  "Zipf-like popularity (the sample's four topics by default)"),
             queues_per_topic: int = typer.Option(8, help="queues per topic (with --topics)"),
             retry_groups: int = typer.Option(0, help="consumer groups, each with a %RETRY% queue, every tenth "
                                              "with a %DLQ% one (with --topics)"),
             sizes: str = typer.Option("lognormal:600,0.8", "--sizes", help="body sizes with --topics: "
                                       "lognormal:MEAN,SIGMA (mean bytes, sigma of the log) or fixed:BYTES"),
             commit_log_file_size: Optional[int] = COMMIT_LOG_SIZE,
             consume_queue_file_size: Optional[int] = CONSUME_QUEUE_SIZE,
             index_hash_slots: Optional[int] = INDEX_SLOTS, index_max_entries: Optional[int] = INDEX_ENTRIES,
             append: bool = typer.Option(False, "--append", help="add the sample messages to a directory that "
                                         "already holds a store (refused otherwise)")):
    """Write a realistic sample store (topics, queues, tags, keys, mixed bodies, some compressed), or with
    --topics a production-shaped one (many queues, skewed topics, retry queues, mixed sizes)."""
    from ..samples import ProductionSpec, SampleSpec, SizeSpec, generate_production_store, generate_store

    if (store / "commitlog").is_dir() and not append:
        raise InvalidArgumentError(f"{store} already holds a store (it has commitlog/); generate writes made-up "
                                   "sample messages and topics into it: choose a new directory, or pass --append "
                                   "to add them to this store")
    # sizes for a new store; an existing one must match them
    file_sizes = sizes_given(commit_log_file_size, consume_queue_file_size, index_hash_slots, index_max_entries)
    with progress_bar() as bar:
        task = bar.add_task("generating", total=messages)
        advance = lambda n: bar.advance(task, n)  # noqa: E731
        if topics is None:
            result = generate_store(store, SampleSpec(messages=messages, days=days, seed=seed,
                                                      body_bytes=body_bytes), progress=advance, **file_sizes)
        else:
            spec = ProductionSpec(messages=messages, topics=topics, queues_per_topic=queues_per_topic,
                                  retry_groups=retry_groups, seed=seed, days=days,
                                  sizes=SizeSpec.parse(sizes if body_bytes is None else f"fixed:{body_bytes}"))
            result = generate_production_store(store, spec, progress=advance, **file_sizes)
    queues = f" in {result['queues']:,} queues of {result['topics']:,} topics" if "queues" in result else ""
    console.print(f"wrote {result['messages']:,} messages{queues} to {store} (commit log ends at "
                  f"{result['end_phy_offset']:,})")
