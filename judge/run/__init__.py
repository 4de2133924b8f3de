"""Running evaluations: one sample (`score`), a dataset (`evaluate`), data loading, results."""
