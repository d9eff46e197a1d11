"""``python -m rocketstore_spark.cli``: the same as the ``rocketstore`` command."""

from .app import main

main()
