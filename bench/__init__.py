"""judge's benchmarks, run from the repository root: `python -m bench.KIND.SCRIPT`."""
