"""`judge eval` of conversations two of which share an id (audit finding 4), as a user runs
it: the later one is an error row naming both, in one process, in shards merged, with
--processes, in the dry run; and `judge traces export` sends the first one's scores to its
own trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge.conversations import turn_records
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.chats import assistant, conversation, user
from tests.helpers.cli import run


def chat(cid: str, question: str, answer: str, context: str, trace: int) -> dict[str, Any]:
    return conversation(
        user(question),
        assistant(answer, context, trace_id=f"{trace:032x}", span_id=f"{trace:016x}"),
        id=cid,
    )


# c1 and c2 each given twice; split round-robin by conversation into two shards, the
# first c2 (conversation 1) is in shard 2 and its repeat (conversation 4) in shard 1.
CHATS = [
    chat("c1", "What colour is the sky?", "The sky is blue.", "The sky is blue on a clear day.", 1),
    chat("c2", "Capital of France?", "Paris is the capital.", "Paris is the capital of France.", 2),
    chat("c1", "Capital of Italy?", "Berlin is the capital.", "Rome is the capital of Italy.", 3),
    chat("c3", "Who wrote Hamlet?", "Shakespeare wrote Hamlet.", "Shakespeare wrote Hamlet.", 4),
    chat("c2", "Largest ocean?", "The Atlantic is largest.", "The Pacific is the largest.", 5),
]
REPEATS = {
    2: "conversations 0 and 2 (numbered from 0 in the input) have the same id 'c1'",
    4: "conversations 1 and 4 (numbered from 0 in the input) have the same id 'c2'",
}


@pytest.fixture
def server() -> Any:
    with FakeLLMServer(chat=heuristic_judge) as fake:
        yield fake


def args(data: Path, server: FakeLLMServer, out: Path, *extra: str) -> list[Any]:
    return [
        "eval", data, "--metrics", "faithfulness", "--model", "openai/judge", "--api-base",
        server.base_url, "--api-key", "k", "--cache", out.parent / f"{out.name}.sqlite", "--out",
        out, "--no-progress", "--no-record", "--max-error-rate", "1", *extra,
    ]  # fmt: skip


def judged(out: Path) -> list[tuple[Any, ...]]:
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return [
        (r["row"], r["id"], r["error"], r["scores"].get("faithfulness"), r.get("conversation_id"))
        for r in map(json.loads, lines)
    ]


def summary(out: Path) -> dict[str, Any]:
    whole = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"metrics": whole["metrics"], "resampled": whole["resampled"], "rows": whole["rows"]}


def test_a_repeated_id_is_an_error_row_in_one_process_in_shards_and_processes(tmp_path, server):
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in CHATS), encoding="utf-8")
    done = run(*args(data, server, tmp_path / "one"))
    assert done.returncode == 0, done.stderr
    rows = judged(tmp_path / "one")
    assert [r[1] for r in rows] == ["c1#2", "c2#2", "c1", "c3#2", "c2"]
    for number, why in REPEATS.items():
        assert why in rows[number][2] and rows[number][3] is None and rows[number][4] is None
    assert [r[3] for r in rows if r[2] is None] == [1.0, 1.0, 1.0]  # the first ones judged
    assert summary(tmp_path / "one")["resampled"] == {
        "unit": "conversation",
        "conversations": 5,  # was 3: each repeat was one conversation with the first
        "turns": 5,
    }
    assert REPEATS[2] in done.stderr  # the run names the unreadable rows
    shards = []
    for index in (1, 2):
        out = tmp_path / f"shard{index}"
        done = run(*args(data, server, out, "--shard", f"{index}/2"))
        assert done.returncode == 0, done.stderr
        shards.append(out)
    done = run("merge", tmp_path / "merged", *shards, "--no-record", "--max-error-rate", "1")
    assert done.returncode == 0, done.stderr
    done = run(*args(data, server, tmp_path / "procs", "--processes", "2"))
    assert done.returncode == 0, done.stderr
    for out in (tmp_path / "merged", tmp_path / "procs"):
        assert judged(out) == rows
        assert summary(out) == summary(tmp_path / "one")


def test_the_dry_run_names_the_repeated_ids(tmp_path, server):
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in CHATS), encoding="utf-8")
    done = run(*args(data, server, tmp_path / "out", "--dry-run"))
    assert done.returncode == 0, done.stderr
    assert all(why in done.stdout for why in REPEATS.values()), done.stdout
    assert server.count() == 0


def test_traces_export_sends_the_first_conversations_scores_to_its_own_trace(tmp_path, server):
    data = tmp_path / "chats.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in CHATS[:3]), encoding="utf-8")
    assert run(*args(data, server, tmp_path / "out")).returncode == 0
    events = tmp_path / "events.jsonl"
    done = run("traces", "export", tmp_path / "out", "--rows", data, "--otlp-json", events)
    assert done.returncode == 0, done.stderr
    assert "wrote 2 evaluation events (2 rows, 1 metric)" in done.stdout, done.stdout
    sent = [
        record["traceId"]
        for line in events.read_text(encoding="utf-8").splitlines()
        for resource in json.loads(line)["resourceLogs"]
        for scope in resource["scopeLogs"]
        for record in scope["logRecords"]
    ]
    assert sorted(sent) == [f"{1:032x}", f"{2:032x}"]  # not conversation 2's trace (3)


# The same chats as rows giving their own place (conversation_id, turn, history), as
# turn_records writes them: rows 2 and 4 repeat rows 0 and 1's places. Split round-robin by
# row into two shards, row 1 is in shard 2 and its repeat, row 4, in shard 1.
ROWS = [row for number, c in enumerate(CHATS) for row in turn_records(c, number)]
ROW_REPEATS = {
    2: "rows 0 and 2 (numbered from 0 in the input) are both turn 2 of conversation 'c1'",
    4: "rows 1 and 4 (numbered from 0 in the input) are both turn 2 of conversation 'c2'",
}


def test_a_row_at_an_earlier_rows_place_is_an_error_row_in_shards_processes_and_dry_run(
    tmp_path, server
):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    done = run(*args(data, server, tmp_path / "one"))
    assert done.returncode == 0, done.stderr
    rows = judged(tmp_path / "one")
    assert [r[1] for r in rows] == ["c1#2", "c2#2", "c1#2", "c3#2", "c2#2"]
    for number, why in ROW_REPEATS.items():
        assert why in rows[number][2] and rows[number][3] is None and rows[number][4] is None
    assert [r[3] for r in rows if r[2] is None] == [1.0, 1.0, 1.0]
    assert summary(tmp_path / "one")["resampled"] == {
        "unit": "conversation",
        "conversations": 5,  # was 3: each repeat was one conversation with the first
        "turns": 5,
    }
    shards = []
    for index in (1, 2):
        out = tmp_path / f"shard{index}"
        done = run(*args(data, server, out, "--shard", f"{index}/2"))
        assert done.returncode == 0, done.stderr
        shards.append(out)
    done = run("merge", tmp_path / "merged", *shards, "--no-record", "--max-error-rate", "1")
    assert done.returncode == 0, done.stderr
    done = run(*args(data, server, tmp_path / "procs", "--processes", "2"))
    assert done.returncode == 0, done.stderr
    for out in (tmp_path / "merged", tmp_path / "procs"):
        assert judged(out) == rows
        assert summary(out) == summary(tmp_path / "one")
    done = run(*args(data, server, tmp_path / "dry", "--dry-run"))
    assert done.returncode == 0, done.stderr
    assert all(why in done.stdout for why in ROW_REPEATS.values()), done.stdout
