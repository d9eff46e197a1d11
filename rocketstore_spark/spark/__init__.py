"""The Spark layer: the ``rocketstore`` Python data source (calls the store facade, never parses bytes)."""
