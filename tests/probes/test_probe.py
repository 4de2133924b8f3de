"""`judge.probe` against the fake server: each probe passing with a well-behaved scripted
judge and failing with one scripted to show the bias it looks for."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import judge
from judge.probes.probe import probe
from judge.testing import FakeLLMServer, data_blocks, heuristic_judge
from judge.testing.replies import message_text

PYTHON = "Python was created by Guido van Rossum."
PARIS = "Paris is the capital of France."
WRONG = "Python was created by Larry Wall."
CONTEXTS = [PYTHON, PARIS]
QUESTION = "Who was Python created by?"


def row(i: int, answer: str, truth: str = PYTHON) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "question": QUESTION,
        "answer": answer,
        "contexts": CONTEXTS,
        "ground_truth": truth,
    }


# faithfulness under the heuristic judge: 1, 1/2, 1, 0, 1
ROWS = [
    row(0, PYTHON),
    row(1, f"{PYTHON} {WRONG}"),
    row(2, PARIS, PARIS),
    row(3, WRONG),
    {
        "id": "zh",
        "question": "法国的首都是哪里？",
        "answer": "巴黎是法国的首都。",
        "contexts": ["巴黎是法国的首都。", "水在一百度沸腾。"],
        "ground_truth": "巴黎是法国的首都。",
    },
]
FAITHFULNESS = [1.0, 0.5, 1.0, 0.0, 1.0]
METRICS = ["faithfulness", "context_precision", "context_recall"]


def blocks(body: dict[str, Any]) -> dict[str, Any]:
    user = next(m for m in body["messages"] if m["role"] == "user")
    return data_blocks(message_text(user["content"]))


def words(text: str) -> set[str]:
    return set(re.findall(r"[\u4e00-\u9fff]|\w+", text.lower()))


def verdicts(claims: list[str], supported: list[bool]) -> str:
    return json.dumps(
        {
            "verdicts": [
                {"claim": i, "verdict": "supported" if s else "not_found", "reason": "r"}
                for i, s in enumerate(supported)
            ]
        }
    )


def is_verify(b: dict[str, Any]) -> bool:
    return "claims" in b and "contexts" in b


def is_grading(b: dict[str, Any]) -> bool:
    return "question" in b and "contexts" in b


def position_judge(body: dict[str, Any]) -> str:
    """Reads only the first context, and grades by position: 3, then 0s."""
    b = blocks(body)
    if is_verify(b):
        first = words(b["contexts"][0])
        return verdicts(b["claims"], [words(c) <= first for c in b["claims"]])
    if is_grading(b):
        grades = [3] + [0] * (len(b["contexts"]) - 1)
        items = [{"context": i, "grade": g, "reason": "r"} for i, g in enumerate(grades)]
        return json.dumps({"contexts": items})
    return heuristic_judge(body)


FILLER_WORDS = ("summarise", "in other words", "总之", "换句话说")


def filler_loving_judge(body: dict[str, Any]) -> str:
    """The heuristic judge, except that it calls filler sentences supported."""
    b = blocks(body)
    if is_verify(b):
        reply = json.loads(heuristic_judge(body))
        for v, claim in zip(reply["verdicts"], b["claims"], strict=True):
            if any(w in claim.lower() for w in FILLER_WORDS):
                v.update(verdict="supported", context=0)
        return json.dumps(reply)
    return heuristic_judge(body)


def noisy_judge(body: dict[str, Any]) -> str:
    """Every claim supported at odd seeds, none at even ones (and at no seed)."""
    b = blocks(body)
    if is_verify(b):
        return verdicts(b["claims"], [(body.get("seed") or 0) % 2 == 1] * len(b["claims"]))
    return heuristic_judge(body)


def atomic_judge(body: dict[str, Any]) -> str:
    """The heuristic judge, with claims cut at semicolons and line ends too."""
    b = blocks(body)
    if "text" in b:
        return json.dumps(
            {"claims": [p.strip() + "." for p in re.split(r"[.;。；\n]", b["text"]) if p.strip()]}
        )
    return heuristic_judge(body)


def contrary_second_model(body: dict[str, Any]) -> str:
    """The heuristic judge for `judge`; for `judge2`, every verdict the other way round."""
    reply = heuristic_judge(body)
    if body.get("model") == "judge2" and is_verify(blocks(body)):
        data = json.loads(reply)
        for v in data["verdicts"]:
            v["verdict"] = "not_found" if v["verdict"] == "supported" else "supported"
        reply = json.dumps(data)
    return reply


@pytest.fixture
def server():
    with FakeLLMServer(chat=heuristic_judge) as fake:
        yield fake


def llm(server: FakeLLMServer, model: str = "openai/judge") -> judge.LLM:
    return judge.LLM(model, api_base=server.base_url, api_key="k", max_retries=0)


def run(server: FakeLLMServer, probes: list[str], **kwargs: Any) -> judge.ProbeResult:
    kwargs.setdefault("metrics", METRICS)
    return probe(ROWS, llm=llm(server), probes=probes, progress=False, **kwargs)


def by(result: judge.ProbeResult, name: str, metric: str = "faithfulness") -> Any:
    (check,) = [c for c in result.checks if c.probe == name and c.metric == metric]
    return check


def test_a_steady_judge_holds_the_repeat_probe_and_each_repeat_has_its_own_key(server, tmp_path):
    cache = tmp_path / "cache.sqlite"
    result = run(server, ["repeat"], repeats=3, cache=cache)
    check = by(result, "repeat")
    assert check.held is True and check.rows == 5
    assert check.figures["mean_std"] == 0.0 and check.figures["crossing_share"] == 0.0
    sent = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert {b.get("seed") for b in sent} == {None, 1, 2, 3}
    assert {b["temperature"] for b in sent if b.get("seed")} == {0.7}
    # every repeat made its own requests: the seed is in the cache key
    assert [result.runs[f"repeat {k}"].usage["requests"] for k in (1, 2, 3)] == [
        result.runs["base"].usage["requests"]
    ] * 3
    made = server.count()
    again = run(server, ["repeat"], repeats=3, cache=cache)
    assert server.count() == made  # all four runs served from the cache
    assert [c.figures for c in again.checks] == [c.figures for c in result.checks]


def test_a_judge_that_answers_by_seed_fails_the_repeat_probe(server):
    server.chat = noisy_judge
    result = run(server, ["repeat"], repeats=3)
    check = by(result, "repeat")
    assert check.held is False
    assert check.figures["crossing_share"] == 1.0  # 1, 0, 1 on every row
    assert check.figures["mean_std"] == pytest.approx((2 / 9) ** 0.5)
    assert by(result, "repeat", "context_precision").held is True  # grades are not noisy
    assert check.worst == [0, 1, 2, 3, 4]  # all alike: in row order
    assert result.moved(check)[0]["scores"] == {"repeat 1": 1.0, "repeat 2": 0.0, "repeat 3": 1.0}
    assert "FAILED" in result.table() and result.failed


def test_a_content_reading_judge_holds_the_order_probe(server):
    result = run(server, ["order"])
    for metric in METRICS:
        check = by(result, "order", metric)
        assert check.held is True and check.rows == 5
        assert check.figures["max_abs_change"] == 0.0
    # the contexts really were swapped, and precision followed them down
    shuffled = result.runs["order"].rows
    assert shuffled[0].contexts == [PARIS, PYTHON]
    # Row 2's reference is about Paris: the Python context holds none of its own words
    # (capped to 1) and the heuristic judge does not grade Paris relevant to a question
    # about Python, so nothing is relevant in either order.
    assert [r.scores["context_precision"] for r in shuffled] == [0.5, 0.5, 0.0, 0.5, 0.5]
    base = result.runs["base"].rows
    assert [r.scores["context_precision"] for r in base] == [1.0, 1.0, 0.0, 1.0, 1.0]


def test_faithfulness_strict_is_probed_like_faithfulness(server):
    result = run(server, ["order", "verbosity", "granularity"], metrics=["faithfulness_strict"])
    probes = {c.probe for c in result.checks if c.metric == "faithfulness_strict"}
    assert probes == {"order", "verbosity", "granularity:joined", "granularity:lines"}
    assert by(result, "order", "faithfulness_strict").held is True


def first_sentence_judge(body: dict[str, Any]) -> str:
    """heuristic_judge, but the needed sentence is always the first shown."""
    if "sentences" in blocks(body):
        return json.dumps({"reason": "The first one.", "needed": [0]})
    return heuristic_judge(body)


def test_context_focus_must_not_move_when_the_contexts_are_shuffled(server):
    held = by(run(server, ["order"], metrics=["context_focus"]), "order", "context_focus")
    assert held.held is True  # the heuristic judge picks by words, wherever they stand
    server.chat = first_sentence_judge
    moved = by(run(server, ["order"], metrics=["context_focus"]), "order", "context_focus")
    assert moved.held is False
    # rows 0, 1, 3: Python's sentence (kept, 1/2) becomes Paris's (off topic, dropped: 0),
    # and the Chinese row's likewise; row 2 (about Paris) keeps an on-topic sentence
    assert moved.figures["mean_abs_change"] == pytest.approx(2 / 5)


def test_a_judge_that_follows_context_position_fails_the_order_probe(server):
    server.chat = position_judge
    result = run(server, ["order"])
    faithfulness = by(result, "order")
    assert faithfulness.held is False
    # 1 -> 0, 1/2 -> 0, 0 -> 1, 0 -> 0, 1 -> 0: the judge read the first context only
    assert faithfulness.figures["mean_abs_change"] == pytest.approx(3.5 / 5)
    assert faithfulness.worst == [0, 2, 4, 1]  # the largest moves first; row 3 stayed at 0
    assert result.moved(faithfulness)[0] == {
        "row": 0,
        "id": "r0",
        "question": QUESTION,
        "scores": {"base": 1.0, "order": 0.0},
    }
    precision = by(result, "order", "context_precision")
    assert precision.held is False  # grades 3, 0 stayed with the positions, not the contexts
    # Where the reference is about Python (4 rows) 0.5 is expected (the relevant context
    # moved second), but judge's no-shared-word cap takes the Paris context's 3 to 1, so
    # nothing is relevant: 0.0 (-0.5). On row 2 (reference about Paris) the base order's
    # 3 for Python was capped (none of the reference's own words): 0.0 expected, and the
    # shuffled 3 for Paris counts: 1.0 (+1.0).
    assert precision.figures["mean_change"] == pytest.approx((4 * -0.5 + 1.0) / 5)
    assert by(result, "order", "context_recall").held is False


def test_filler_gains_nothing_from_a_sound_judge(server):
    embeddings = judge.Embeddings("openai/embed", api_base=server.base_url, api_key="k")
    result = run(
        server,
        ["verbosity"],
        metrics=["faithfulness", "answer_relevancy"],
        embeddings=embeddings,
    )
    assert by(result, "verbosity").held is True
    assert by(result, "verbosity").figures["mean_gain"] < 0  # filler claims are unsupported
    relevancy = by(result, "verbosity", "answer_relevancy")
    assert relevancy.held is True and relevancy.rows == 5
    padded = result.runs["verbosity"].rows
    assert padded[0].answer.startswith(PYTHON + " To summarise, as noted above")
    assert padded[4].answer.startswith("巴黎是法国的首都。总之，如上所述")


def test_a_judge_that_supports_filler_fails_the_verbosity_probe(server):
    server.chat = filler_loving_judge
    result = run(server, ["verbosity"], metrics=["faithfulness"])
    check = by(result, "verbosity")
    assert check.held is False
    # two filler claims supported: 1 -> 1, 1/2 -> 3/4, 1 -> 1, 0 -> 2/3, 1 -> 1
    assert check.figures["mean_gain"] == pytest.approx((0.25 + 2 / 3) / 5)
    assert check.figures["rows_gaining"] == 2


def test_the_granularity_probe_catches_a_judge_that_does_not_split_joined_sentences(server):
    result = run(server, ["granularity"], metrics=["faithfulness"])
    joined, lines = by(result, "granularity:joined"), by(result, "granularity:lines")
    assert lines.held is True and lines.figures["max_abs_change"] == 0.0
    # "A; B." is one claim to the heuristic judge: row 1 (1/2) drops to 0
    assert joined.figures["rows_moved"] == 1 and joined.figures["mean_abs_change"] == 0.1
    assert joined.held is True  # 0.1 is the tolerance
    server.chat = heuristic_judge
    two = [row(0, f"{PYTHON} {PARIS}"), row(1, f"{PYTHON} {WRONG}")]
    moved = probe(
        two, llm=llm(server), probes=["granularity"], metrics=["faithfulness"], progress=False
    )
    assert by(moved, "granularity:joined").held is False  # 1 -> 0 and 1/2 -> 0
    assert by(moved, "granularity:joined").figures["mean_abs_change"] == 0.75


def test_a_judge_with_atomic_claims_holds_the_granularity_probe(server):
    server.chat = atomic_judge
    # five rows: the fewest on which a check can hold (checks.MIN_ROWS)
    five = [row(i, f"{PYTHON} {PARIS if i % 2 == 0 else WRONG}") for i in range(5)]
    result = probe(
        five, llm=llm(server), probes=["granularity"], metrics=["faithfulness"], progress=False
    )
    for variant in ("joined", "lines"):
        check = by(result, f"granularity:{variant}")
        assert check.held is True and check.figures["max_abs_change"] == 0.0


def test_two_models_that_agree_hold_and_two_that_disagree_fail(server):
    same = run(server, [], metrics=["faithfulness"], second_llm=llm(server, "openai/judge2"))
    check = by(same, "models")
    assert check.held is True
    assert check.figures["spearman"] == pytest.approx(1.0) and check.figures["kappa"] == 1.0
    assert same.config["probes"] == ["models"] and same.config["second_model"] == "openai/judge2"
    server.chat = contrary_second_model
    other = run(server, [], metrics=["faithfulness"], second_llm=llm(server, "openai/judge2"))
    check = by(other, "models")
    assert check.held is False and check.figures["spearman"] == pytest.approx(-1.0)
    assert check.figures["kappa"] < 0
    assert check.figures["spearman_ci_low"] <= check.figures["spearman_ci_high"]
    assert [r.scores["faithfulness"] for r in other.runs["base"].rows] == FAITHFULNESS


def test_json_and_text_name_each_expectation_and_whether_it_held(server):
    server.chat = position_judge
    result = run(server, ["order", "verbosity"])
    data = result.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["failed"] == len(result.failed) >= 1
    order = [c for c in data["checks"] if c["probe"] == "order"]
    assert {c["metric"] for c in order} == set(METRICS)
    assert all("mean_abs_change <= 0.05" in c["expectation"] for c in order)
    assert data["scores"]["base"]["faithfulness"] == [1.0, 0.5, 0.0, 0.0, 1.0]
    assert data["config"]["tolerance"]["order"] == 0.05
    text = result.table()
    assert "expectations:" in text and "contexts shuffled, the score stays" in text


def test_bad_arguments_are_refused_before_any_request(server):
    assert judge.probe is probe and "probe" in judge.__all__  # the lazy export
    with pytest.raises(judge.JudgeError, match="unknown probe"):
        run(server, ["loudness"])
    with pytest.raises(judge.JudgeError, match="at least 2"):
        run(server, ["repeat"], repeats=1)
    with pytest.raises(judge.JudgeError, match="pass mark from 0 to 1"):
        run(server, ["order"], threshold=float("nan"))
    assert server.count() == 0


def test_the_command_writes_json_and_html_exits_1_on_a_failed_probe_and_reruns_free(
    server, tmp_path
):
    from tests.helpers.cli import run as cli

    server.chat = position_judge
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), "utf-8")
    args = [
        "probe",
        data,
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "sk-probe-secret-42",
        "--cache",
        tmp_path / "cache.sqlite",
        "--metrics",
        "faithfulness,context_precision",
        "--probes",
        "order,repeat",
        "--repeats",
        "2",
        "--second-model",
        "openai/judge2",
        "--no-progress",
    ]
    first = cli(*args, "--out", tmp_path / "out")
    assert first.returncode == 1, first.stderr  # the order probe failed
    assert "FAILED" in first.stdout and "wrote" in first.stdout
    made = server.count()
    written = json.loads((tmp_path / "out" / "probe.json").read_text("utf-8"))
    probes = {(c["probe"], c["metric"]): c["held"] for c in written["checks"]}
    assert probes == {
        ("repeat", "faithfulness"): True,
        ("repeat", "context_precision"): True,
        ("order", "faithfulness"): False,
        ("order", "context_precision"): False,
        ("models", "faithfulness"): True,
        ("models", "context_precision"): True,  # 1.0 but on row 2 (0.0) for both models
    }
    page = (tmp_path / "out" / "probe.html").read_text("utf-8")
    assert "FAILED" in page and "contexts shuffled" in page and "http" not in page.lower()
    assert "rows_moved 5" in first.stdout and "spearman 1.000 [1.000, 1.000]" in page
    assert "Rows that moved most" in page and "base 1.000 → order 0.000" in page
    for text in (first.stdout, page, json.dumps(written)):
        assert "sk-probe-secret-42" not in text
    second = cli(*args, "--format", "json")
    assert second.returncode == 1 and server.count() == made  # served from the cache
    again = json.loads(second.stdout)
    assert again["checks"] == written["checks"]
    assert all(u["requests"] == 0 for u in again["usage"].values())
    bad = cli(*args[:-1], "--probes", "loudness")
    assert bad.returncode == 2 and "unknown probe loudness" in bad.stderr
