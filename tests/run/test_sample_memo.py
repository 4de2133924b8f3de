"""A replay judges a sample met again (the same texts under another id) from memory
(`judge.run.sample_memo.SampleMemo`) and puts its checkpoint line together from the first
row's (`LineTemplate`): the outputs must be those of a replay that judges every row."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from judge import LLM, Embeddings
from judge.cache.store import Cache
from judge.cli.finish import finish_run
from judge.llm.session import LLMSession
from judge.llm.usage import UsageLedger
from judge.metrics.custom import judged_metric
from judge.metrics.registry import get_metric
from judge.run.checkpoint import Checkpoint, LineTemplate
from judge.run.data import Row
from judge.run.evaluate import evaluate
from judge.run.gates import Gates
from judge.run.rows import ResultRow
from judge.run.sample_memo import SampleMemo
from judge.run.score import SampleResult
from judge.samples import Sample
from judge.testing import heuristic_judge

TOPICS = ["Python", "Rust", "SQLite"]


def sample(i: int, row_id: object, **extra: object) -> dict:
    """A sample about project i, with its own id (and extra columns)."""
    t = TOPICS[i % len(TOPICS)]
    return {
        "id": row_id,
        "question": f"What is {t} used for in project {i}?",
        "answer": f"{t} is used for project {i}. {t} is fast.",
        "contexts": [f"{t} is used for project {i}.", "Bananas are yellow.", f"{t} is fast."],
        "ground_truth": f"{t} is used for project {i}. It started in {2000 + i}.",
        "retrieved_ids": ["d1", "d2"],
        "relevance": {"d2": 1},
        **extra,
    }


DISTINCT = [
    sample(0, "a0"),
    sample(1, "a1", team="x"),
    sample(2, "a2"),
    {**sample(3, "a3"), "contexts": []},  # NaN scores with their reasons
]
ROWS = [
    *DISTINCT,
    sample(0, 'b"0 ünï\\cöde 中文'),  # an id JSON escapes, and one it does not
    sample(1, "b1", team="x"),  # the same extra column: remembered
    sample(1, "b1y", team="y"),  # another value: judged again
    sample(2, 7),  # an id that is a number in the input
    {**sample(3, "b3"), "contexts": []},
    sample(0, "c0"),
    {"id": "bad", "question": "", "answer": "no question"},  # a bad input row
]


@pytest.fixture
def models(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    base = fake_llm_server.base_url
    return {
        "llm": LLM("openai/judge-model", api_base=base, api_key="k", max_retries=0),
        "embeddings": Embeddings("openai/embed-model", api_base=base, api_key="k"),
    }


@pytest.fixture
def filled(tmp_path, models) -> Path:
    """A cache holding every judgment of ROWS (the distinct samples and the one with
    another extra column, which the judges do not read)."""
    path = tmp_path / "cache.sqlite"
    with Cache(path) as cache:
        evaluate(DISTINCT, llm=models["llm"], embeddings=models["embeddings"], cache=cache)
    return path


def replay(tmp_path: Path, name: str, models: dict, cache_path: Path, metrics: list[str]) -> Path:
    """ROWS replayed from the cache (no memo of responses: every lookup reaches SQLite),
    written as judge eval writes them; returns the output directory."""
    cache = Cache(cache_path, mode="replay")
    session = LLMSession(models["llm"], embeddings=models["embeddings"], cache=cache, memo_bytes=0)
    result = evaluate(ROWS, llm=session, metrics=metrics, progress=False)
    out = tmp_path / name
    finish_run(result, out, Gates(max_error_rate=1.0))
    cache.close()
    return out


def normalised(path: Path) -> str:
    """A summary or report without the run's own timing."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        data["config"].pop("seconds")
        return json.dumps(data, sort_keys=True)
    return re.sub(r"&quot;seconds&quot;: [0-9.]+", "", text)


CORE = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]


@pytest.mark.parametrize("metrics", [CORE, [*CORE, "ndcg@10"]], ids=["judged", "with_retrieval"])
def test_a_replay_from_memory_writes_what_judging_every_row_writes(
    tmp_path, models, filled, monkeypatch, metrics
):
    memos: list[SampleMemo] = []
    lines: list[bytes] = []
    made = SampleMemo.for_run

    def counted(*args, **kwargs):
        memo = made(*args, **kwargs)
        assert memo is not None  # a replay of built-in metrics
        original = memo.line

        def line(*a, **k):
            found = original(*a, **k)
            if found is not None:
                lines.append(found)
            return found

        memo.line = line  # type: ignore[method-assign]
        memos.append(memo)
        return memo

    monkeypatch.setattr(SampleMemo, "for_run", staticmethod(counted))
    fast = replay(tmp_path, "fast", models, filled, metrics)
    # b0, b1, 7, b3 and c0 met their samples again; b1y (another extra value) did not.
    assert len(memos) == 1 and memos[0].hits == 5
    if "ndcg@10" in metrics:
        assert not lines  # a row's retrieval scores are its own: its line is encoded
    else:  # c0, the second row to meet sample 0 again: put together from b0's line
        assert len(lines) == 1

    monkeypatch.setattr(SampleMemo, "for_run", staticmethod(lambda *a, **k: None))
    plain = replay(tmp_path, "plain", models, filled, metrics)

    assert (fast / "results.jsonl").read_bytes() == (plain / "results.jsonl").read_bytes()
    for name in ("summary.json", "report.html"):
        assert normalised(fast / name) == normalised(plain / name)
    rows = [json.loads(line) for line in (fast / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [str(r["id"]) for r in ROWS]
    assert rows[4]["scores"] == rows[0]["scores"] and rows[4]["row"] == 4
    assert rows[8]["reasons"] and rows[8]["reasons"] == rows[3]["reasons"]
    assert rows[4]["usage"]["total"]["cache_hits"] > 0
    summary = json.loads((fast / "summary.json").read_text())
    per_row = rows[0]["usage"]["total"]["cache_hits"]
    assert summary["usage"]["cache_hits"] >= 5 * per_row  # the remembered rows' hits counted


def test_a_memo_is_made_only_for_a_replay_of_built_in_metrics(tmp_path, models):
    built_in = [get_metric("faithfulness")]

    class Rating(BaseModel):
        rating: int

    custom = judged_metric(
        "mine",
        prompt="<<<system>>>\nRate.\n<<<user>>>\n{{answer}}",
        output=Rating,
        score=lambda r: r.rating / 5,
    )

    def session(mode: str | None) -> LLMSession:
        cache = Cache(tmp_path / "c.sqlite", mode=mode) if mode else None
        return LLMSession(models["llm"], cache=cache)

    assert SampleMemo.for_run(built_in, session("replay")) is not None
    assert SampleMemo.for_run(built_in, session("read-write")) is None  # a request may go out
    assert SampleMemo.for_run(built_in, session(None)) is None
    assert SampleMemo.for_run([*built_in, custom], session("replay")) is None
    assert SampleMemo.for_run(built_in, session("replay"), ["ndcg@10"]).lines is False


def judged(sample_: Sample, **usage: int) -> SampleResult:
    """A sample's result with one judge's usage."""
    counts = {"cache_hits": 2, "requests": 0, "retries": 0, "prompt_tokens": 0, **usage}
    return SampleResult(
        sample_, {"faithfulness": 1.0}, usage={"total": counts, "by_judge": {"claims": counts}}
    )


def row_of(sample_: Sample, number: int = 0) -> Row:
    """An input row holding the sample."""
    return Row(number, sample_)


def test_only_samples_judged_wholly_from_the_cache_are_remembered():
    ledger = UsageLedger()
    memo = SampleMemo(ledger)
    one = Sample.create("q?", "a.", ["c."], None, "1")
    key = memo.key(row_of(one))
    assert key is not None
    memo.put(key, judged(one, requests=1))  # a request went out: not a pure replay
    memo.put(key, SampleResult(one, {"faithfulness": math.nan}, errors={"faithfulness": "x"}))
    assert memo.get(key, one) is None and len(memo) == 0
    memo.put(key, judged(one))
    again = Sample.create("q?", "a.", ["c."], None, "2")
    found = memo.get(memo.key(row_of(again)), again)
    assert found is not None and found.sample is again and found.scores == {"faithfulness": 1.0}
    assert ledger.of("claims").cache_hits == 2  # counted in the run as the judges would
    # Not remembered: a turn of a conversation, an extra column JSON cannot hold exactly.
    turn = Sample.create("q?", "a.", ["c."], None, "t", turn=2, conversation_id="c")
    assert memo.key(row_of(turn)) is None
    dated = Sample.create("q?", "a.", ["c."], None, "d", extra={"when": object()})
    assert memo.key(row_of(dated)) is None


def test_the_memo_forgets_the_least_recently_used_past_its_budget():
    samples = [Sample.create(f"q{i}?", "a.", ["c."], None, str(i)) for i in range(3)]
    memo = SampleMemo(UsageLedger(), limit=2 * (8192 + 4 * 7))  # 7: the texts' length
    keys = [memo.key(row_of(s)) for s in samples]
    for s, key in zip(samples[:2], keys[:2], strict=True):
        memo.put(key, judged(s))
    assert memo.get(keys[0], samples[0]) is not None  # now the most recently used
    memo.put(keys[2], judged(samples[2]))
    assert memo.get(keys[1], samples[1]) is None and len(memo) == 2
    assert memo.get(keys[0], samples[0]) is not None and not memo.stopped


def test_a_memo_full_before_any_sample_is_met_again_stops():
    samples = [Sample.create(f"q{i}?", "a.", ["c."], None, str(i)) for i in range(3)]
    memo = SampleMemo(UsageLedger(), limit=2 * (8192 + 4 * 7))
    for s in samples:
        memo.put(memo.key(row_of(s)), judged(s))
    assert memo.stopped and len(memo) == 0 and memo.used == 0
    assert memo.key(row_of(samples[2])) is None  # nothing more is remembered or looked up


@pytest.mark.parametrize(
    "row_id", ["r1", 'quote " and \\ back', "ünï 中文 \u2028", None, "", "1e5"]
)
def test_a_line_template_gives_the_line_the_checkpoint_encodes(row_id):
    spill = Checkpoint(None, "f" * 64)
    evidence = {
        "answer_claims": ['"id": "r1", "question": "x"', ', "row": 3, "scores": '],
        "id": 3,
        "row": 3,
    }
    first = ResultRow(
        3,
        "r1",
        'What "is" it?',
        "It is.",
        ["c", '"row": 3'],
        None,
        scores={"faithfulness": 1.0, "m": math.nan},
        reasons={"m": "no_claims"},
        evidence=evidence,
        usage={"total": {"cache_hits": 2}},
    )
    line = spill.encode(3, "a" * 64, first)
    template = LineTemplate.of(line, spill.fingerprint, 3, "a" * 64, "r1")
    assert template is not None
    again = ResultRow(
        123456,
        row_id,
        first.question,
        first.answer,
        first.contexts,
        None,
        scores=first.scores,
        reasons=first.reasons,
        evidence=evidence,
        usage=first.usage,
    )
    assert template.line(123456, "b" * 64, row_id) == spill.encode(123456, "b" * 64, again)
    # Not the line of this row: no template.
    assert LineTemplate.of(line, spill.fingerprint, 4, "a" * 64, "r1") is None
    assert LineTemplate.of(line, spill.fingerprint, 3, "a" * 64, "r2") is None
