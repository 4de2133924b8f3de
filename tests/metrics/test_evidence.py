"""Typed evidence and findings: every built-in metric's evidence, from a real run through the
fake judge, reads into the typed values and back to the same JSON, gives findings, and the
three renderers (report.html, the pytest failure message, the OpenTelemetry explanation)
show them; a custom metric gets its judge's reply; no renderer names a built-in metric."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

import judge
from judge.metrics.custom import judged_metric
from judge.metrics.evidence import (
    CITATION_CHECKS,
    CITATIONS,
    CONTEXT_GRADES,
    CONTEXT_SENTENCES,
    CORRECTNESS,
    REVERSE_QUESTIONS,
    SIDES,
    Evidence,
    claims_key,
    verdicts_key,
)
from judge.metrics.registry import BUILTIN, findings_of
from judge.pytest_plugin.assertions import evidence_lines
from judge.run.report_html import evidence_html
from judge.run.rows import ResultRow
from judge.traces.explanations import explain
from tests.helpers.judging import GOOD

ROOT = Path(judge.__file__).parent
# The modules that format findings, none of which may know a built-in metric by name: the
# whole module, or the functions of it that show evidence (the assertions' error messages
# give `faithfulness=0.8` as an example of a threshold).
RENDERERS: dict[str, tuple[str, ...] | None] = {
    "run/report_html.py": None,
    "pytest_plugin/assertions.py": ("evidence_lines", "_check", "assert_scores", "_scored"),
    "traces/explanations.py": None,
    "traces/events.py": None,
}
CITED = {
    **GOOD,
    "answer": "Guido van Rossum created Python [1]. It runs on Mars [3].",
    # tool calls that differ from the expected ones, so trajectory_accuracy is judged
    "tools_called": [{"name": "search", "arguments": {"q": "Python author"}}],
    "expected_tools": [{"name": "search", "arguments": {"q": "Python creator"}}],
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[ResultRow]:
    """Two samples judged on every built-in metric through the fake server's heuristic
    judge, as result rows read back from results.jsonl."""
    from judge import LLM, Embeddings
    from judge.testing import FakeLLMServer
    from tests.helpers.judging import judge_handler

    out = tmp_path_factory.mktemp("all_metrics") / "out"
    with FakeLLMServer() as server:
        server.chat = judge_handler
        result = judge.evaluate(
            [GOOD, CITED],
            metrics=list(BUILTIN),
            llm=LLM("openai/judge", api_base=server.base_url, api_key="k", max_retries=1),
            embeddings=Embeddings("openai/embed", api_base=server.base_url, api_key="k"),
            progress=False,
        )
    result.write(out)
    return [ResultRow.from_json(r.to_json()) for r in result.rows]


def test_every_evidence_value_reads_and_writes_back_the_same_json(rows):
    ev = Evidence(rows[1].evidence)
    data = rows[1].evidence
    for side in SIDES:
        claims = ev.claims(side)
        assert claims is not None and list(claims.claims) == data[claims_key(side)]
        assert [v.to_json() for v in claims.verdicts or ()] == data[verdicts_key(side)]
    assert [g.to_json() for g in ev.context_grades()] == data[CONTEXT_GRADES]
    assert ev.reverse_questions().to_json() == data[REVERSE_QUESTIONS]
    assert ev.correctness().to_json() == data[CORRECTNESS]
    assert [c.to_json() for c in ev.citation_checks()] == data[CITATION_CHECKS]
    assert [c.to_json() for c in ev.citations()] == data[CITATIONS]
    assert ev.context_sentences().to_json() == data[CONTEXT_SENTENCES]
    assert ev.to_json() == data


def test_odd_or_missing_evidence_reads_without_failing():
    ev = Evidence({"answer_claims": ["a"], "answer_verdicts": [{"verdict": 3}, "junk"]})
    claims = ev.claims("answer")
    assert [v.verdict for v in claims.verdicts] == ["3", "?"]
    assert claims.claim(None) == "?" and claims.claim(7) == "?"
    assert Evidence(None).context_grades() == () and Evidence({}).claims("truth") is None
    assert findings_of("faithfulness", {"context_grades": "not a list"}) == []


@pytest.fixture(scope="module")
def turn() -> ResultRow:
    """The second turn of a conversation judged on every built-in metric."""
    from judge import LLM, Embeddings
    from judge.testing import FakeLLMServer
    from tests.helpers.judging import judge_handler

    chat = {
        "id": "c",
        "reference": "The user learns who created Python.",
        "turns": [
            {"role": "user", "content": "I use Python."},
            {"role": "assistant", "content": "Noted.", "contexts": GOOD["contexts"]},
            {"role": "user", "content": GOOD["question"]},
            {
                "role": "assistant",
                "content": GOOD["answer"],
                "contexts": GOOD["contexts"],
                "ground_truth": GOOD["ground_truth"],
                "query": "Python creator",
                "tools_called": CITED["tools_called"],
                "expected_tools": CITED["expected_tools"],
            },
        ],
    }
    with FakeLLMServer() as server:
        server.chat = judge_handler
        result = judge.evaluate(
            [chat],
            metrics=list(BUILTIN),
            llm=LLM("openai/judge", api_base=server.base_url, api_key="k", max_retries=1),
            embeddings=Embeddings("openai/embed", api_base=server.base_url, api_key="k"),
            progress=False,
        )
    return ResultRow.from_json(result.rows[-1].to_json())


def test_every_built_in_metric_turns_its_evidence_into_findings(rows, turn):
    for metric in BUILTIN:
        # the conversation metrics judge a conversation's turns only
        conversational = ("knowledge_retention", "query_rewrite_fidelity", "goal_accuracy")
        row = turn if metric in conversational else rows[1]
        found = findings_of(metric, row.evidence, row.contexts or [])
        assert found, metric
        assert all(f.title and f.summary for f in found), metric
    row = rows[1]
    # one that failed on the claims: the unsupported one is an item against the score
    (claims,) = findings_of("faithfulness", row.evidence, row.contexts or [])
    bad = [i for i in claims.items if i.ok is False]
    assert [i.text for i in bad] == ["It runs on Mars."]
    assert bad[0].name.startswith("answer claim ")
    # a citation names the statement citing and the context cited
    (cites,) = findings_of("citation_accuracy", row.evidence, row.contexts or [])
    assert [(i.text, i.source) for i in cites.items] == [
        ("Guido van Rossum created Python.", "context 1"),
        ("It runs on Mars.", "context 3"),
    ]


def test_the_three_renderers_show_every_metrics_findings(rows):
    row = rows[1]
    html = evidence_html(row)
    for metric in BUILTIN:
        if not findings_of(metric, row.evidence, row.contexts or []):
            continue
        lines = evidence_lines(metric, row.evidence, row.contexts or [])
        assert lines != ["(no evidence recorded for this metric)"], metric
        assert explain(metric, row), metric
        for finding in findings_of(metric, row.evidence, row.contexts or []):
            assert f"<b>{finding.title}</b>" in html, (metric, finding.title)
    # the unsupported claim, in each of the three
    assert "It runs on Mars." in html
    assert any(
        "It runs on Mars." in line for line in evidence_lines("faithfulness", row.evidence, [])
    )
    assert "It runs on Mars." in explain("hallucination_rate", row)


def test_a_custom_metric_gets_its_judges_reply_as_its_finding():
    class Rating(BaseModel):
        rating: int
        reason: str

    metric = judged_metric(
        "tone",
        prompt="<<<system>>>\nRate.\n<<<user>>>\n{{answer}}",
        output=Rating,
        score=lambda r: r.rating / 5,
    )
    evidence = {"tone": {"rating": 1, "reason": "Condescending   to the reader."}}
    (finding,) = findings_of(metric, evidence)
    assert finding.summary == "Condescending to the reader."
    # read back by name (a run folder's custom metric, not registered): the same default
    assert findings_of("tone", evidence) == [finding]
    row = ResultRow(row=0, scores={"tone": 0.2}, evidence=evidence)
    assert explain("tone", row) == "Condescending to the reader."
    assert evidence_lines("tone", evidence, []) == ["Condescending to the reader."]
    assert "Condescending to the reader." in evidence_html(row)
    # a reply without a reason field: the reply itself
    (bare,) = findings_of("tone", {"tone": {"rating": 1}})
    assert bare.summary == '{"rating": 1}'
    # no reply (a retrieval metric, or a score without evidence): no finding
    assert findings_of("ndcg@10", evidence) == [] and explain("ndcg@10", row) is None


def _strings(tree: ast.AST) -> list[str]:
    """The string constants of a module, docstrings left out."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_no_renderer_names_a_built_in_metric_or_an_evidence_key():
    names = {*BUILTIN, *(claims_key(s) for s in SIDES), *(verdicts_key(s) for s in SIDES)}
    names |= {CONTEXT_GRADES, CONTEXT_SENTENCES, CORRECTNESS, REVERSE_QUESTIONS, CITATION_CHECKS}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
    for module, functions in RENDERERS.items():
        tree = ast.parse((ROOT / module).read_text("utf-8"))
        parts: list[ast.AST] = [tree]
        if functions is not None:
            parts = [n for n in ast.walk(tree) if getattr(n, "name", None) in functions]
            assert len(parts) == len(functions), f"judge/{module}: {functions} not all found"
        named = sorted({m for p in parts for s in _strings(p) for m in pattern.findall(s)})
        assert not named, f"judge/{module} names {named}: format findings instead"


def test_the_name_check_finds_a_metric_named_in_a_renderer():
    tree = ast.parse('"""faithfulness in a docstring is fine."""\nx = "a faithfulness: y"\n')
    assert _strings(tree) == ["a faithfulness: y"]


def test_a_nan_score_still_explains_itself_by_its_reason():
    row = ResultRow(row=0, scores={"faithfulness": math.nan}, reasons={"faithfulness": "no_claims"})
    assert explain("faithfulness", row) is None
