"""A/B comparison of two evaluations or two TREC runs, with paired statistics."""
