"""Judging on Ray (the extra judge[ray]): `judge.ray.evaluate` over a `ray.data.Dataset`.

Nothing here imports ray until a function runs, and nothing outside this package imports
it at all: `import judge` and `judge --help` never load ray.
"""

from judge.ray.evaluate import evaluate

__all__ = ["evaluate"]
