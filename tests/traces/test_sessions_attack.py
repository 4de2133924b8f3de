"""Sessions from damaged traces (issue 40): a trace without start times cannot be put in
its place among its session's turns."""

from __future__ import annotations

import json
from pathlib import Path

from judge.conversations import turn_records
from tests.helpers.cli import run
from tests.helpers.session_traces import Traces


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_trace_without_start_times_is_skipped_not_made_the_first_turn(tmp_path):
    """The third turn's spans lost their start times (a damaged export): its start was
    1970, so it became the session's first turn, and the turns after it in the file were
    judged with it as their history. A trace one of whose spans alone lost its start
    (here the second turn's retriever) starts when its other spans start."""
    traces = Traces()
    ids = [traces.turn(n, f"Q{n}", f"A{n}", session="s") for n in range(1, 4)]
    path = traces.write(tmp_path / "t.jsonl")
    requests = jsonl(path)
    for request in requests:
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    damaged = span["traceId"] == ids[2] or (
                        span["traceId"] == ids[1] and "parentSpanId" in span
                    )
                    if damaged:
                        del span["startTimeUnixNano"]
    path.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    out = tmp_path / "s.jsonl"
    done = run("traces", "extract", path, "-o", out, "--sessions")
    assert done.returncode == 0, done.stderr
    ((session,),) = [jsonl(out)]
    assert [t["content"] for t in session["turns"]] == ["Q1", "A1", "Q2", "A2"]
    (skip,) = jsonl(tmp_path / "skipped.jsonl")
    assert (skip["trace_id"], skip["reason"]) == (ids[2], "no_start_time")


def test_a_turn_answered_without_retrieval_stays_in_its_session(tmp_path):
    """A chat turn the app answered without retrieving ("I live in Lyon." "Noted.") was
    skipped as no_retriever, so it was missing from its conversation: a later answer
    resting on what the user said in it was judged without it (a hallucination, where
    the user had said it). As rows (without --sessions) it is still skipped."""
    traces = Traces()
    traces.turn(1, "Which options are there?", "Express takes one day.", session="s")
    said = traces.turn(2, "I live in Lyon.", "Noted.", session="s", retrieves=False)
    traces.turn(3, "Where does it go?", "Your parcel goes to Lyon.", session="s")
    path = traces.write(tmp_path / "t.jsonl")
    out = tmp_path / "s.jsonl"
    done = run("traces", "extract", path, "-o", out, "--sessions")
    assert done.returncode == 0, done.stderr
    ((session,),) = [jsonl(out)]
    turns = session["turns"]
    assert [t["content"] for t in turns][2:4] == ["I live in Lyon.", "Noted."]
    assert (turns[3]["trace_id"], turns[3]["contexts"], turns[3]["retrieved_ids"]) == (
        said,
        [],
        None,
    )
    assert not (tmp_path / "skipped.jsonl").exists() or jsonl(tmp_path / "skipped.jsonl") == []
    rows = tmp_path / "rows.jsonl"
    done = run("traces", "extract", path, "-o", rows)
    assert done.returncode == 0, done.stderr
    ((skip,),) = [jsonl(tmp_path / "skipped.jsonl")]
    assert (skip["trace_id"], skip["reason"]) == (said, "no_retriever")


def test_a_turn_the_app_failed_keeps_what_the_user_said_in_its_session(tmp_path):
    """A turn whose trace has no answer (the app failed) was left out of its session, and
    what the user said in it with it: the next answer, resting on it, was judged without
    it. The user's message stays (the next turn answers both), the trace is still reported
    as skipped (no_output: no answer to judge), and as rows nothing changes."""
    traces = Traces()
    traces.turn(1, "Which options are there?", "Express takes one day.", session="s")
    failed = traces.turn(2, "Ship it to my flat in Lyon.", None, session="s")
    traces.turn(3, "When does it arrive?", "Your parcel reaches Lyon tomorrow.", session="s")
    path = traces.write(tmp_path / "t.jsonl")
    out = tmp_path / "s.jsonl"
    done = run("traces", "extract", path, "-o", out, "--sessions")
    assert done.returncode == 0, done.stderr
    ((session,),) = [jsonl(out)]
    assert [(t["role"], t["content"]) for t in session["turns"]] == [
        ("user", "Which options are there?"),
        ("assistant", "Express takes one day."),
        ("user", "Ship it to my flat in Lyon."),
        ("user", "When does it arrive?"),
        ("assistant", "Your parcel reaches Lyon tomorrow."),
    ]
    (skip,) = jsonl(tmp_path / "skipped.jsonl")
    assert (skip["trace_id"], skip["reason"]) == (failed, "no_output")
    assert f"the span {traces.roots[failed]} (chat) that has the question" in skip["message"]
    assert "1 no_output" in done.stdout
    rows = turn_records(session, 0)
    assert [r["turn"] for r in rows] == [2, 5]
    assert rows[1]["question"] == "Ship it to my flat in Lyon.\n\nWhen does it arrive?"
