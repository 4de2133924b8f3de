"""Collect the code blocks of the README and the docs as tests (tests/helpers/docs.py)."""

from tests.helpers.docs import docs_sybil

pytest_collect_file = docs_sybil().pytest()

# pytest's own pytester: tests/pytest_plugin/ runs test files through judge's pytest plugin.
pytest_plugins = ["pytester"]
