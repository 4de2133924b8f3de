"""`adapt` recognises framework objects without importing the frameworks: the base install
and a plain function never load LangChain, LlamaIndex or Haystack."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("langchain", "langchain_core", "langchain_classic", "llama_index", "haystack")

CHECK = """
import sys
from judge.experiments.app import as_app, parse_reply
from judge.experiments.adapters import adapt

def ask(question):
    return {{"answer": question, "contexts": []}}

class Engine:
    def query(self, question):
        return question

assert adapt(ask) is None and adapt(Engine()) is None and adapt("text") is None
app = as_app(ask)
assert parse_reply(app.call("q")).answer == "q"
print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in {frameworks!r})) or "none")
"""


def test_the_app_contract_and_adapt_load_no_framework():
    code = CHECK.format(frameworks=set(FRAMEWORKS))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "none"


def test_import_judge_loads_no_framework():
    code = (
        "import sys, judge, judge.experiments; "
        f"print(any(m.split('.')[0] in {set(FRAMEWORKS)!r} for m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
