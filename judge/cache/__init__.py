"""The cache of judgments: readable JSON in SQLite, keyed by what the model sees."""
