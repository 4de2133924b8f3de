"""judge.experiments holds no row it is not working on: the test set is read from its file
as questions are asked, finished answers wait on disk (not in memory) for
app_outputs.jsonl, and the judging reads each output row from that file when it is judged.
Measured with tracemalloc: the peak must stay well below the bytes of the rows."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from pathlib import Path

from judge import experiment
from judge.experiments.app import as_app
from judge.experiments.calls import ProgressFile, ask_all
from judge.experiments.experiment import load_testset

QUESTIONS = 600
BIG = 20_000  # characters of each answer, and of each question's notes column: 12 MB each


def write_testset(path: Path, size: int = BIG) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for n in range(QUESTIONS):
            row = {
                "id": f"q{n}",
                "question": f"question {n} {size}",
                "notes": f"{n} " + "n" * size,  # an extra column, carried to every output row
                "relevance": {f"d{n % 7}": 1},
            }
            out.write(json.dumps(row) + "\n")
    return path


async def big_app(question: str) -> dict:
    _, n, size = question.split()
    await asyncio.sleep(0.001 * (int(n) % 5))  # finishing out of order
    ids = [f"d{(int(n) + i) % 7}" for i in range(3)]
    return {"answer": f"{n} " + "a" * int(size), "contexts": ["c"], "retrieved_ids": ids}


def peak_of(call) -> tuple[object, int]:
    tracemalloc.start()
    try:
        value = call()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_asking_keeps_no_answer_in_memory_and_gives_them_in_input_order(tmp_path):
    testset = load_testset(write_testset(tmp_path / "testset.jsonl"))
    progress = ProgressFile(tmp_path / ".app_outputs.jsonl", as_app(big_app))

    async def asking():
        return await ask_all(
            as_app(big_app), testset.questions, progress, concurrency=16, timeout=10
        )

    (answers, stats), peak = peak_of(lambda: asyncio.run(asking()))
    assert stats.asked == QUESTIONS and not stats.errors
    # Every answer and notes column (24 MB) went through; a few rows' worth stayed.
    assert peak < 3_000_000, peak
    assert [row["id"] for row in answers] == [f"q{n}" for n in range(QUESTIONS)]
    assert all(row["answer"].startswith(f"{n} ") for n, row in enumerate(answers))


def test_an_experiment_holds_neither_the_test_set_nor_the_outputs(tmp_path):
    def run(size):
        data = write_testset(tmp_path / f"testset-{size}.jsonl", size)
        out = tmp_path / f"out-{size}"
        return experiment(
            big_app, data, out=out, metrics=["mrr"], app_concurrency=16, progress=False
        ), out

    _, small = peak_of(lambda: run(10))
    (result, out), peak = peak_of(lambda: run(BIG))
    # The rows are 24 MB of answers and notes more; the peak (the bootstrap's draws, the
    # same for both) grows by a few rows' worth.
    assert peak - small < 3_000_000, (small, peak)
    lines = (out / "app_outputs.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == [f"q{n}" for n in range(QUESTIONS)]
    assert all(r["notes"].startswith(f"{n} ") for n, r in enumerate(rows))
    assert all(r["answer"].startswith(f"{n} ") for n, r in enumerate(rows))
    assert [row.scores["mrr"] for row in result.rows] == [1.0] * QUESTIONS
