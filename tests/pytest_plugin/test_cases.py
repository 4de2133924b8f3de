"""`judge.pytest_plugin.cases` over the files users keep their test sets in, judged by
`rag_judge.assert_scores` as the rows come (pytester, the fake server's heuristic judge)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.pytester import load_judged_modules

load_judged_modules()


def test_cases_of_a_csv_test_set_are_judged_with_their_contexts(
    pytester: pytest.Pytester,
    fake_llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A CSV cell holds the contexts as JSON text: `judge eval` reads it, and
    `rag_judge.assert_scores(case)` refused it ("contexts must be a list of strings")."""
    fake_llm_server.chat = heuristic_judge
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    (pytester.path / "golden.csv").write_text(
        "id,question,answer,contexts\n"
        'tower,How tall is the tower?,The tower is tall.,"[""The tower is tall.""]"\n'
        "empty,How tall is the tower?,The tower is tall.,\n",
        encoding="utf-8",
    )
    pytester.makepyfile(
        test_golden="""
import pytest
from judge.pytest_plugin import cases

@pytest.mark.parametrize("case", cases("golden.csv"))
def test_each(rag_judge, case):
    rag_judge.assert_scores(case, faithfulness=1.0)
"""
    )
    result = pytester.runpytest(
        *("--judge-model", "openai/judge-model", "--judge-api-base", fake_llm_server.base_url),
        *("--judge-cache", str(tmp_path / "cache.sqlite"), "-p", "no:randomly", "-v"),
    )
    # The row without contexts has nothing to support its claim: it fails as unfaithful.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_each?tower? PASSED*", "*test_each?empty? FAILED*"])
    result.stdout.fnmatch_lines(["*faithfulness*"])
