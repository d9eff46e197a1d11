"""A small generated store shared by the product tests (CLI, examples, notebook, cluster)."""

import pytest

from rocketstore_spark.sample import SampleSpec, generate_store


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("sample") / "store"
    generate_store(path, SampleSpec(messages=3000, days=0.5, seed=3), commit_log_file_size=1 << 20,
                   consume_queue_file_size=6000, index_hash_slots=4000, index_max_entries=16000)
    return path
