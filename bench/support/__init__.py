"""What the benchmark scripts share: their virtualenvs, a local embedding model."""
