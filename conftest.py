"""Collect the code blocks of the README and the docs as tests (tests/helpers/docs.py)."""

import os
import sys

# Bytecode is written for what the tests import, whatever PYTHONDONTWRITEBYTECODE says (set
# on the CI machines): otherwise each of the suite's hundreds of interpreters compiles
# judge and the openai client again, 0.3-0.8 s of CPU apiece. Set before anything imports.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from tests.helpers.docs import docs_sybil  # noqa: E402  (after the bytecode setting)

# Haystack reports each pipeline run to its telemetry service unless this is off, read when
# haystack is first imported: no test or docs block may reach the internet.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

pytest_collect_file = docs_sybil().pytest()

# pytest's own pytester: tests/pytest_plugin/ runs test files through judge's pytest plugin.
pytest_plugins = ["pytester"]
