"""A run through the fast paths (judgments started eagerly, responses remembered within the
run, keys built from cached schema text) writes what the plain paths write."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

from judge import LLM, Embeddings, aio
from judge.cache.memo import ResponseMemo, estimated_bytes
from judge.cache.store import Cache, cache_key
from judge.cli.finish import finish_run
from judge.llm.session import LLMSession
from judge.run.evaluate import evaluate
from judge.run.gates import Gates
from judge.run.sample_memo import SampleMemo
from judge.testing import heuristic_judge

TOPICS = ["Python", "Rust", "SQLite"]


def sample(i: int, row_id: str) -> dict:
    """A sample about project i, with its own id."""
    t = TOPICS[i % len(TOPICS)]
    return {
        "id": row_id,
        "question": f"What is {t} used for in project {i}?",
        "answer": f"{t} is used for project {i}. {t} is fast.",
        "contexts": [f"{t} is used for project {i}.", "Bananas are yellow.", f"{t} is fast."],
        "ground_truth": f"{t} is used for project {i}. It started in {2000 + i}.",
    }


def handler(body: dict) -> str:
    """The heuristic judge."""
    return heuristic_judge(body)


ROWS = [
    *(sample(i, f"cached{i}") for i in range(4)),  # filled before the runs
    sample(0, "again0"),  # the same requests as row 0 under another id
    sample(1, "again1"),
    sample(5, "new5"),  # not in the cache: asked from the server
    sample(6, "new6"),
    {"id": "bad", "question": "", "answer": "no question"},  # a bad input row
    # No failing judge here: a failed call cancels its sibling, and whether the sibling's
    # reply was counted in the usage first depends on timing (a known limit, open).
]


def run(tmp_path: Path, name: str, models: dict, cache: Path, memo_bytes: int) -> tuple[Path, int]:
    """One run of ROWS against `cache` (read-write), its outputs written as judge eval does;
    (the output directory, reads answered by SQLite)."""
    session = LLMSession(
        models["llm"], embeddings=models["embeddings"], cache=Cache(cache), memo_bytes=memo_bytes
    )
    result = evaluate(ROWS, llm=session, progress=False)
    assert session.cache is not None
    session.cache.close()
    out = tmp_path / name
    finish_run(result, out, Gates(max_error_rate=1.0))
    return out, session.cache.hits


def normalised(path: Path, cache: Path) -> str:
    """A summary or report with the run's own cache path and timing taken out."""
    text = path.read_text(encoding="utf-8").replace(str(cache), "CACHE")
    data = json.loads(text) if path.suffix == ".json" else None
    if data is not None:
        data["config"].pop("seconds")
        return json.dumps(data, sort_keys=True)
    return re.sub(r"&quot;seconds&quot;: [0-9.]+", "", text)


@pytest.fixture
def models(fake_llm_server):
    fake_llm_server.chat = handler
    base = fake_llm_server.base_url
    return {
        "llm": LLM("openai/judge-model", api_base=base, api_key="k", max_retries=0, max_reasks=1),
        "embeddings": Embeddings("openai/embed-model", api_base=base, api_key="k"),
    }


def test_a_mixed_replay_through_the_fast_paths_equals_the_plain_paths(
    tmp_path, fake_llm_server, models, monkeypatch
):
    fill = tmp_path / "fill.sqlite"
    with Cache(fill) as cache:  # closed before copying: its WAL is written back
        filled = evaluate(ROWS[:4], llm=models["llm"], embeddings=models["embeddings"], cache=cache)
    assert filled.rows_with_errors == 0
    shutil.copy(fill, tmp_path / "plain.sqlite")
    shutil.copy(fill, tmp_path / "fast.sqlite")

    fake_llm_server.reset()
    fast, fast_reads = run(tmp_path, "fast", models, tmp_path / "fast.sqlite", memo_bytes=2**20)
    fast_requests = sorted(json.dumps(r.body, sort_keys=True) for r in fake_llm_server.requests)
    fake_llm_server.reset()
    monkeypatch.setattr(aio, "EAGER", False)  # every coroutine an ordinary task, as before
    plain, plain_reads = run(tmp_path, "plain", models, tmp_path / "plain.sqlite", memo_bytes=0)
    plain_requests = sorted(json.dumps(r.body, sort_keys=True) for r in fake_llm_server.requests)

    rows = [json.loads(line) for line in (fast / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in ROWS[:9]]  # a row error keeps its id
    assert rows[8]["error"]
    assert rows[4]["scores"] == rows[0]["scores"] and rows[6]["usage"]["total"]["requests"] > 0
    assert fast_requests == plain_requests and fast_requests  # the uncached rows, alike
    assert fast_reads < plain_reads  # the repeated rows were remembered, not read again
    assert (fast / "results.jsonl").read_bytes() == (plain / "results.jsonl").read_bytes()
    for name in ("summary.json", "report.html"):
        assert normalised(fast / name, tmp_path / "fast.sqlite") == normalised(
            plain / name, tmp_path / "plain.sqlite"
        )


@pytest.mark.parametrize("sample_memo", [True, False])
def test_repeated_requests_are_read_from_the_cache_once_per_run(
    tmp_path, models, monkeypatch, sample_memo
):
    if not sample_memo:  # each row's requests made, so the response memo answers them
        monkeypatch.setattr(SampleMemo, "for_run", staticmethod(lambda *a, **k: None))
    path = tmp_path / "c.sqlite"
    evaluate(ROWS[:2], llm=models["llm"], embeddings=models["embeddings"], cache=path)
    repeated = [sample(0, f"copy{n}") for n in range(5)]
    for memo_bytes in (2**20, 0):
        cache = Cache(path, mode="replay")
        session = LLMSession(
            models["llm"], embeddings=models["embeddings"], cache=cache, memo_bytes=memo_bytes
        )
        result = evaluate(repeated, llm=session, progress=False)
        per_row = result.rows[0].usage["total"]["cache_hits"]
        assert per_row > 0 and result.usage["cache_hits"] == 5 * per_row  # counted every time
        if memo_bytes or sample_memo:  # each distinct request read from SQLite once
            assert cache.hits <= per_row
        else:
            assert cache.hits == 5 * per_row
        cache.close()


def test_keys_built_from_parts_equal_the_canonical_key(tmp_path, fake_llm_server, models):
    llm = LLM(
        "openai/judge-model",
        api_base=fake_llm_server.base_url,
        api_key="k",
        temperature=0.3,
        seed=7,
        max_tokens=900,
        cache_as="gpu1",
    )
    odd = {
        **sample(2, "odd"),
        "answer": 'Ünïcode "quoted" <b>&amp;</b> answer.\nSecond line, 中文。',
    }
    cache = Cache(tmp_path / "c.sqlite")
    evaluate([odd], llm=llm, embeddings=models["embeddings"], cache=cache, progress=False)
    entries = list(cache.entries())
    assert {e.kind for e in entries} == {"chat", "embedding"}
    assert all(cache_key(e.request) == e.key for e in entries)
    assert all(e.request["server"] == "gpu1" for e in entries if e.kind == "chat")


def test_a_session_keys_each_call_by_the_settings_it_was_made_with(tmp_path, models):
    # The session lays out a judge's key once (a KeyTemplate per output model, prompt and
    # settings): settings changed on the session, even to a value equal in Python but
    # encoded apart (0, 0.0 and -0.0), must give the key of what was sent.
    from dataclasses import replace

    from judge.metrics.judges import extract_claims

    cache = Cache(tmp_path / "c.sqlite")
    session = LLMSession(models["llm"], cache=cache)

    async def claims() -> None:
        await extract_claims(session, question="What is Rust?", text="Rust is fast.")

    settings = (
        {"temperature": 0},
        {"temperature": 0.0},
        {},
        {"temperature": -0.0},
        {"seed": 1},
        {"max_tokens": 5},
    )
    for changes in settings:
        session.llm = replace(models["llm"], **changes)
        asyncio.run(claims())
    entries = list(cache.entries())
    assert len(entries) == 5  # 0.0 is the default: the call with {} was a hit
    assert all(cache_key(e.request) == e.key for e in entries)
    assert len({e.key for e in entries}) == 5


def test_the_memo_forgets_the_least_recently_used_past_its_budget():
    vector = [0.5] * 100  # 64 + 32 * 100 bytes, as estimated
    size = estimated_bytes(vector)
    memo = ResponseMemo(limit=2 * size)
    memo.put("a", vector)
    memo.put("b", list(vector))
    assert memo.get("a") is vector  # now the most recently used
    memo.put("c", list(vector))
    assert memo.get("b") is None and memo.get("a") is vector and len(memo) == 2
    memo.forget("a")
    assert memo.get("a") is None and memo.used == size
    memo.put("huge", [0.0] * 1000)  # over the whole budget: not kept, nothing dropped
    assert memo.get("huge") is None and memo.get("c") is not None
    assert ResponseMemo(limit=0).get("a") is None


def test_a_replay_of_requests_all_different_holds_only_the_last_few_mib_of_responses(
    tmp_path, fake_llm_server
):
    # 6,000 texts' vectors of 256 floats (about 13 MB as remembered): a replay meets each
    # once, as a replay of real logs meets its rows' requests; a session that kept them
    # all (64 MiB were allowed) grew with the rows, and its garbage collector's passes
    # over them cost a replay of 10,000 such rows a second of CPU in ten.
    from tests.helpers.memory import peak_bytes

    texts = [f"text number {i} of the replay" for i in range(6000)]
    embeddings = Embeddings("openai/embed-model", api_base=fake_llm_server.base_url, api_key="k")
    path = tmp_path / "cache.sqlite"
    with Cache(path) as cache:
        aio.run_sync(LLMSession(embeddings=embeddings, cache=cache).embed_array(texts))
    with Cache(path, mode="replay") as cache:
        session = LLMSession(embeddings=embeddings, cache=cache)

        async def replay() -> None:
            for start in range(0, len(texts), 4):  # a row's few texts at a time
                await session.embed_array(texts[start : start + 4])

        peak = peak_bytes(lambda: aio.run_sync(replay()))
        assert cache.hits == len(texts)
    assert peak < 8 * 2**20
