"""Sample-store generators: realistic stores for the demo, the examples, the tests and the benchmarks.

:func:`generate_store` writes a small store with a few topics, tags, keys and mixed bodies;
:func:`generate_production_store` writes a production-shaped one (many topics of skewed popularity, retry and
dead-letter queues, message sizes from a distribution). Both write through the store facade, so the result is
a store a real broker can serve. ``rocketstore generate`` is their command line.
"""

from .production import ProductionSpec, SizeSpec, generate_production_store, production_tables, queue_layout
from .sample_store import SampleSpec, generate_store

__all__ = [
    "ProductionSpec",
    "SampleSpec",
    "SizeSpec",
    "generate_production_store",
    "generate_store",
    "production_tables",
    "queue_layout",
]
