"""Collect the code blocks of the README and the docs as tests (tests/helpers/docs.py)."""

import os

from tests.helpers.docs import docs_sybil

# Haystack reports each pipeline run to its telemetry service unless this is off, read when
# haystack is first imported: no test or docs block may reach the internet.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

pytest_collect_file = docs_sybil().pytest()

# pytest's own pytester: tests/pytest_plugin/ runs test files through judge's pytest plugin.
pytest_plugins = ["pytester"]
