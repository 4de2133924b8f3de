"""One gate, four front ends, one verdict: `judge eval --gate`, `judge.evaluate` with
`judge.assert_evaluation(gates=...)`, the pytest plugin (a test file run by pytester) and
the pass/fail label of the trace export, on the same data, for a metric where higher is
better (faithfulness) and one where lower is (hallucination_rate)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import judge
from judge.pytest_plugin.assertions import ScoreAssertionError
from judge.run.gates import CLI_WORDS, PYTHON_WORDS, Gates
from judge.testing import FakeLLMServer, heuristic_judge
from judge.traces.export import PASS, evaluation_events, read_results
from tests.helpers.cli import run
from tests.helpers.pytester import load_judged_modules

load_judged_modules()  # before any pytester run (tests/helpers/pytester.py)

CONTEXTS = ["The Eiffel Tower is a tower in Paris, France."]
ANSWERS = {
    "faithful": "The Eiffel Tower is in Paris.",  # faithfulness 1, hallucination_rate 0
    "unfaithful": "Bananas grow on tall green plants.",  # faithfulness 0, hallucination_rate 1
}
# (gate, the metric it reads, whether the faithful answer passes, the unfaithful one)
GATES = [
    ("faithfulness>=0.5", "faithfulness", True, False),
    ("hallucination_rate<=0.5", "hallucination_rate", True, False),
]


@pytest.fixture
def server(fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    fake_llm_server.chat = heuristic_judge
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return fake_llm_server


def rows_of(answer: str) -> list[dict]:
    return [
        {
            "id": "r1",
            "question": "Where is the Eiffel Tower?",
            "answer": answer,
            "contexts": CONTEXTS,
            "trace_id": "1" * 32,
            "span_id": "2" * 16,
        }
    ]


def cli_verdict(data: Path, metric: str, gate: str, server: FakeLLMServer, tmp: Path) -> bool:
    out = tmp / "cli-out"
    done = run(
        "eval",
        data,
        "--model",
        "openai/judge-model",
        "--api-base",
        server.base_url,
        "--cache",
        tmp / "cli-cache.sqlite",
        "--metrics",
        metric,
        "--out",
        out,
        "--no-progress",
        "--no-record",
        "--gate",
        gate,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


def python_verdict(rows: list[dict], metric: str, gate: str, server: FakeLLMServer) -> bool:
    llm = judge.LLM("openai/judge-model", api_base=server.base_url, api_key="k")
    result = judge.evaluate(rows, metrics=[metric], llm=llm, cache=None, progress=False)
    try:
        judge.assert_evaluation(result, gates=[gate])
    except ScoreAssertionError:
        return False
    return True


def plugin_verdict(
    pytester: pytest.Pytester, rows: list[dict], metric: str, gate: str, server: FakeLLMServer
) -> bool:
    pytester.makepyfile(
        test_rag=f"""
import judge

def test_gate(rag_judge):
    result = rag_judge.evaluate({rows!r}, metrics=[{metric!r}])
    judge.assert_evaluation(result, gates=[{gate!r}])
"""
    )
    outcome = pytester.runpytest(
        "--judge-model",
        "openai/judge-model",
        "--judge-api-base",
        server.base_url,
        "-p",
        "no:randomly",
    ).parseoutcomes()
    assert outcome.get("passed", 0) + outcome.get("failed", 0) == 1, outcome
    return outcome.get("passed", 0) == 1


def export_verdict(results: Path, rows: list[dict], metric: str, gate: str) -> bool:
    """The trace export's label of the one row's event, the gate's value its threshold."""
    value = float(gate.split("=")[1])
    events = evaluation_events(read_results(results), rows, thresholds={metric: value})
    (event,) = [e for e in events if e.metric == metric]
    return event.label == PASS


@pytest.mark.parametrize("answer", ["faithful", "unfaithful"])
@pytest.mark.parametrize(("gate", "metric", "faithful_passes", "unfaithful_passes"), GATES)
def test_every_front_end_gives_the_same_verdict(
    pytester: pytest.Pytester,
    server: FakeLLMServer,
    tmp_path: Path,
    answer: str,
    gate: str,
    metric: str,
    faithful_passes: bool,
    unfaithful_passes: bool,
) -> None:
    rows = rows_of(ANSWERS[answer])
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    expected = faithful_passes if answer == "faithful" else unfaithful_passes
    verdicts = {
        "cli": cli_verdict(data, metric, gate, server, tmp_path),
        "python": python_verdict(rows, metric, gate, server),
        "pytest": plugin_verdict(pytester, rows, metric, gate, server),
        "export": export_verdict(tmp_path / "cli-out", rows, metric, gate),
    }
    assert verdicts == dict.fromkeys(verdicts, expected)


def test_fail_under_a_lower_is_better_metric_is_refused_naming_the_gate(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(rows_of(ANSWERS["faithful"])[0]) + "\n", encoding="utf-8")
    done = run(
        "eval",
        data,
        "--model",
        "openai/judge-model",
        "--api-base",
        server.base_url,
        "--metrics",
        "hallucination_rate",
        "--out",
        tmp_path / "out",
        "--no-progress",
        "--no-record",
        "--fail-under",
        "hallucination_rate=0.1",
    )
    assert done.returncode == 2, done.stderr
    assert "--gate 'hallucination_rate<=0.1'" in done.stderr
    assert not server.requests  # refused before any row is judged
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_one_scored_row_of_ten_misses_the_gate_in_every_front_end(
    server: FakeLLMServer, tmp_path: Path
) -> None:
    # 1 faithful answer, 9 with no claims (undefined): judge eval --gate passed on the
    # mean of the one row while judge.assert_evaluation refused it. One rule now, the
    # Gates' (`Gates.undefined_rows`), with the same allowance under both names.
    rows = [
        {**rows_of(ANSWERS["faithful"])[0], "id": f"r{i}"}
        if i == 0
        else {**rows_of("...")[0], "id": f"r{i}"}
        for i in range(10)
    ]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gate = "faithfulness>=0.8"
    assert not cli_verdict(data, "faithfulness", gate, server, tmp_path)
    summary = json.loads((tmp_path / "cli-out" / "summary.json").read_text(encoding="utf-8"))
    (missed,) = summary["thresholds"]["missed"]
    assert missed.startswith("faithfulness: 9 rows undefined (9 no_claims); pass --allow-nan")
    assert "mean of the 1 row scored" in missed
    assert not python_verdict(rows, "faithfulness", gate, server)
    llm = judge.LLM("openai/judge-model", api_base=server.base_url, api_key="k")
    result = judge.evaluate(rows, metrics=["faithfulness"], llm=llm, cache=None, progress=False)
    with pytest.raises(
        ScoreAssertionError, match=r"9 rows undefined \(9 no_claims\); pass allow_nan=True"
    ):
        judge.assert_evaluation(result, gates=[gate])
    assert result.write(tmp_path / "py-out", gates=[gate]).code == 1
    # allowed, both gate the mean of the row scored
    judge.assert_evaluation(result, gates=[gate], allow_nan={"faithfulness"})
    allowed = judge.Gates.of([gate], allow_nan={"faithfulness"})
    assert result.write(tmp_path / "py-allowed", gates=allowed).code == 0
    done = run(
        "eval", data, "--model", "openai/judge-model", "--api-base", server.base_url,
        "--cache", tmp_path / "cli-cache.sqlite", "--metrics", "faithfulness",
        "--out", tmp_path / "cli-allowed", "--no-progress", "--no-record",
        "--gate", gate, "--allow-nan", "faithfulness",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("words", "flag"), [(CLI_WORDS, "--allow-nan names"), (PYTHON_WORDS, "allow_nan= names")]
)
def test_allow_nan_naming_a_metric_the_run_does_not_compute_is_refused(words, flag):
    # A misspelt --allow-nan context_recal was taken in silence (the gate then missed with
    # a message asking for --allow-nan context_recall, the name given never questioned).
    gates = Gates.of(["context_recall>=0.5"], allow_nan=["context_recal"], words=words)
    with pytest.raises(judge.JudgeError, match=f"{flag} context_recal, which the run does not"):
        gates.check_metrics(["context_recall", "faithfulness"])
    Gates.of(["context_recall>=0.5"], allow_nan=["faithfulness"], words=words).check_metrics(
        ["context_recall", "faithfulness"]
    )


def test_assert_evaluation_refuses_allow_nan_naming_a_metric_not_scored(server):
    result = judge.evaluate(
        rows_of(ANSWERS["faithful"]),
        metrics=["faithfulness"],
        llm=judge.LLM("openai/judge-model", api_base=server.base_url),
        progress=False,
    )
    with pytest.raises(judge.JudgeError, match="allow_nan= names faithfulnes, which the run"):
        judge.assert_evaluation(result, gates=["faithfulness>=0.5"], allow_nan=["faithfulnes"])
    judge.assert_evaluation(result, gates=["faithfulness>=0.5"], allow_nan=["faithfulness"])
