"""`judge traces extract --sessions`: the traces of a session assembled into one
conversation per line, from traces made by the real OpenTelemetry SDK and from each
trace format judge reads that carries a session id; hostile session ids; the filters
choosing sessions; the same bytes whatever the order of the spans and files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from judge.ir.trec import read_run
from judge.traces.extract import ExtractSummary, extract, judged_ids, read_sessions
from judge.traces.sessions import SessionSpool
from tests.helpers.chats import assistant as said
from tests.helpers.chats import user
from tests.helpers.cli import run
from tests.helpers.rag_spans import DOCS, KIND
from tests.helpers.session_traces import SECOND, START, Traces
from tests.helpers.traces import langfuse_observations, phoenix_frame


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def assistant(
    text: str, trace_id: str, span_id: str, docs: tuple[str, ...] = ("d1",), **extra: Any
) -> dict:
    """A session's turn as `--sessions` writes it: the documents the trace retrieved."""
    return said(
        text,
        *[DOCS[d] for d in docs],
        retrieved_ids=list(docs),
        trace_id=trace_id,
        span_id=span_id,
        **extra,
    )


@pytest.fixture(scope="module")
def chats(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two sessions interleaved in time (A at 0, 20, 40 s; B at 10, 30 s), a trace without
    a session id (at 5 s) and one whose session id is a number (at 50 s)."""
    traces = Traces()
    ids = {
        "a1": traces.turn(0, "I live in Lyon.", "Noted.", "A", docs=("d1",)),
        "none": traces.turn(5, "Hello?", "Hi!"),
        "b1": traces.turn(10, "How long is river 2?", "200 km.", "B", docs=("d2",)),
        "a2": traces.turn(
            20, "Deliver it there.", "Delivery to Lyon.", "A", query="deliver to Lyon", docs=("d3",)
        ),
        "b2": traces.turn(30, "And river 3?", "300 km.", "B", query="river 3 length", docs=("d3",)),
        "a3": traces.turn(40, "When?", "Tomorrow.", "A", docs=("d4", "d5")),
        "n1": traces.turn(50, "Number?", "Yes.", 42),
    }
    folder = tmp_path_factory.mktemp("sessions")
    return {
        "ids": ids,
        "traces": traces,
        "path": traces.write(folder / "traces.jsonl"),
        "shuffled": traces.write(folder / "shuffled.jsonl", per_request=1, shuffle=7),
    }


def expected(chats: dict) -> list[dict]:
    """The conversations of `chats`, each turn with its trace id and its root span's id."""
    ids = chats["ids"]

    def assistant_of(text: str, name: str, *args: Any, **extra: Any) -> dict:
        trace_id = ids[name]
        return assistant(text, trace_id, chats["traces"].roots[trace_id], *args, **extra)

    return [
        {
            "id": "A",
            "turns": [
                user("I live in Lyon."),
                assistant_of("Noted.", "a1"),
                user("Deliver it there."),
                assistant_of("Delivery to Lyon.", "a2", ("d3",), query="deliver to Lyon"),
                user("When?"),
                assistant_of("Tomorrow.", "a3", ("d4", "d5")),
            ],
        },
        {
            "id": "B",
            "turns": [
                user("How long is river 2?"),
                assistant_of("200 km.", "b1", ("d2",)),
                user("And river 3?"),
                assistant_of("300 km.", "b2", ("d3",), query="river 3 length"),
            ],
        },
        {"id": "42", "turns": [user("Number?"), assistant_of("Yes.", "n1")]},
    ]


def test_interleaved_sessions_become_conversations_in_start_order(chats, tmp_path):
    out = tmp_path / "sessions.jsonl"
    done = run(
        "traces", "extract", chats["path"], "-o", out, "--sessions", "--run", tmp_path / "g.trec"
    )
    assert done.returncode == 0, done.stderr
    assert "7 traces (14 spans) read: 6 turns in 3 sessions" in done.stdout
    assert "1 trace skipped (1 no_session)" in done.stdout
    assert jsonl(out) == expected(chats)
    (skip,) = jsonl(tmp_path / "skipped.jsonl")
    assert skip["trace_id"] == chats["ids"]["none"] and skip["reason"] == "no_session"
    # The runs stay per trace: a qid per turn written, none for the skipped trace.
    run_ids = read_run(tmp_path / "g.trec")
    assert set(run_ids) == set(chats["ids"].values()) - {chats["ids"]["none"]}
    assert list(run_ids[chats["ids"]["a3"]]) == ["d4", "d5"]


def test_the_bytes_do_not_depend_on_the_order_of_spans_or_files(chats, tmp_path):
    lines = chats["path"].read_text().splitlines(keepends=True)
    halves = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    halves[0].write_text("".join(lines[::2]))
    halves[1].write_text("".join(lines[1::2]))
    outputs = []
    for n, given in enumerate(
        [[chats["path"]], [chats["shuffled"]], halves, halves[::-1], [chats["shuffled"]] * 2]
    ):
        out = tmp_path / f"out{n}" / "sessions.jsonl"
        done = run("traces", "extract", *given, "-o", out, "--sessions")
        assert done.returncode == 0, done.stderr
        outputs.append(out.read_bytes())
    assert len(set(outputs)) == 1
    assert [json.loads(line) for line in outputs[0].splitlines()] == expected(chats)


def test_read_sessions_is_the_python_twin(chats):
    summary = ExtractSummary()
    skipped: list = []
    found = list(read_sessions(chats["shuffled"], summary=summary, on_skip=skipped.append))
    assert found == expected(chats)
    assert (summary.traces, summary.rows, summary.sessions) == (7, 6, 3)
    assert summary.to_dict()["sessions"] == 3 and dict(summary.skipped) == {"no_session": 1}
    assert [s.reason for s in skipped] == ["no_session"]
    assert "sessions" not in ExtractSummary().to_dict()  # the rows' summary as it was


def test_filters_choose_whole_sessions(chats, tmp_path):
    ids = chats["ids"]
    # --since 35 s: A has a turn then (40 s) and is written whole; B (last turn 30 s) not.
    since = "2026-11-30T00:53:55Z"
    out = tmp_path / "since" / "s.jsonl"
    done = run("traces", "extract", chats["path"], "-o", out, "--sessions", "--since", since)
    assert done.returncode == 0, done.stderr
    assert [c["id"] for c in jsonl(out)] == ["A", "42"]
    assert jsonl(out)[0] == expected(chats)[0]
    assert "2 traces started before --since" in done.stdout  # B's two turns
    # Judged before: a conversations file of A and B; 42 is new.
    judged = tmp_path / "judged.jsonl"
    judged.write_text("".join(json.dumps(c) + "\n" for c in expected(chats)[:2]))
    assert judged_ids([judged]) == {ids[k] for k in ("a1", "a2", "a3", "b1", "b2")}
    out = tmp_path / "judged" / "s.jsonl"
    done = run("traces", "extract", chats["path"], "-o", out, "--sessions", "--judged", judged)
    assert done.returncode == 0, done.stderr
    assert [c["id"] for c in jsonl(out)] == ["42"]
    assert "5 traces judged before" in done.stdout
    # A session with a new turn is written whole, its judged turns as history.
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"trace_id": ids["a1"]}) + "\n")
    found = list(read_sessions(chats["path"], judged=judged_ids([rows])))
    assert [c["id"] for c in found] == ["A", "B", "42"] and found[0] == expected(chats)[0]


def test_a_sample_keeps_whole_sessions_the_same_whatever_the_order(chats, tmp_path):
    picks = []
    for path in (chats["path"], chats["shuffled"]):
        summary = ExtractSummary()
        found = list(read_sessions(path, sample=2, seed=3, summary=summary))
        assert len(found) == 2 and summary.sessions == 2
        assert summary.sampled_out == sum(len(c["turns"]) // 2 for c in expected(chats)) - (
            sum(len(c["turns"]) // 2 for c in found)
        )
        picks.append(found)
    assert picks[0] == picks[1]
    by_id = {c["id"]: c for c in expected(chats)}
    assert all(c == by_id[c["id"]] for c in picks[0])


def test_genai_conversation_id_names_the_session(tmp_path):
    traces = Traces()
    first = traces.turn(0, "Q1", "A1", "conv-1", session_key="gen_ai.conversation.id")
    second = traces.turn(1, "Q2", "A2", "conv-1", session_key="gen_ai.conversation.id")
    (conversation,) = read_sessions(traces.write(tmp_path / "genai.jsonl"))
    assert conversation == {
        "id": "conv-1",
        "turns": [
            user("Q1"),
            assistant("A1", first, traces.roots[first]),
            user("Q2"),
            assistant("A2", second, traces.roots[second]),
        ],
    }


def test_phoenix_and_langfuse_exports_give_the_same_conversations(tmp_path):
    traces = Traces()  # a parquet column holds one type: the session ids are all text
    for n, session in enumerate(["A", None, "B", "A", "B", "A"]):
        traces.turn(n, f"Q{n}", f"A{n}", session, query=f"query {n}" if n % 2 else None)
    reference = list(read_sessions(traces.write(tmp_path / "traces.jsonl")))
    assert [(c["id"], len(c["turns"])) for c in reference] == [("A", 6), ("B", 4)]
    assert reference[0]["turns"][3]["query"] == "query 3"
    assert "query" not in reference[1]["turns"][3]
    bodies = traces.bodies()
    parquet = tmp_path / "spans.parquet"
    phoenix_frame(bodies).to_parquet(parquet)
    assert list(read_sessions(parquet)) == reference
    observations = langfuse_observations(bodies)
    assert {o["sessionId"] for o in observations} == {"A", "B", None}
    lines = tmp_path / "observations.jsonl"
    lines.write_text("".join(json.dumps(o) + "\n" for o in observations))
    assert list(read_sessions(lines)) == reference


def test_langfuse_traces_with_a_session_id_are_its_turns(tmp_path):
    def trace(n: int, at: str, session: str | None) -> dict:
        return {
            "id": f"trace-{n}",
            "timestamp": f"2026-12-01T10:00:{at}.000Z",
            "input": {"question": f"Q{n}"},
            "output": f"A{n}",
            "sessionId": session,
            "observations": [
                {
                    "id": f"obs-{n}",
                    "type": "RETRIEVER",
                    "startTime": f"2026-12-01T10:00:{at}.100Z",
                    "endTime": f"2026-12-01T10:00:{at}.200Z",
                    "input": f"query {n}",
                    "output": [{"id": f"d{n}", "page_content": f"text {n}"}],
                }
            ],
        }

    path = tmp_path / "traces.json"
    path.write_text(json.dumps([trace(2, "30", "s-1"), trace(1, "10", "s-1"), trace(3, "20", "")]))
    summary = ExtractSummary()
    (conversation,) = read_sessions(path, summary=summary)
    # The span a Langfuse trace's row is read from is the trace itself, as in the rows.
    turn = {"contexts": ["text 1"], "retrieved_ids": ["d1"], "trace_id": "trace-1"}
    turn["span_id"] = "trace-1"
    assert conversation["id"] == "s-1"
    assert conversation["turns"][:2] == [
        user("Q1"),
        {"role": "assistant", "content": "A1", **turn, "query": "query 1"},
    ]
    assert conversation["turns"][3]["trace_id"] == "trace-2"
    assert dict(summary.skipped) == {"no_session": 1}  # an empty sessionId is none


def otlp_turn(n: int, session: dict | None, at: int = 0) -> dict:
    """One hand-written OTLP/JSON request of one trace; `session` is the AnyValue of its
    session.id (None: no attribute), to give any value an exporter could write."""
    trace_id, root, child = f"{n + 1:032x}", f"{2 * n + 1:016x}", f"{2 * n + 2:016x}"
    t = START + (at or n) * SECOND

    def attributes(items: dict[str, Any]) -> list[dict]:
        return [
            {"key": k, "value": v if isinstance(v, dict) else {"stringValue": v}}
            for k, v in items.items()
        ]

    root_attributes: dict[str, Any] = {
        KIND: "CHAIN",
        "input.value": f"Q{n}",
        "output.value": f"A{n}",
    }
    if session is not None:
        root_attributes["session.id"] = session
    spans = [
        {
            "traceId": trace_id,
            "spanId": root,
            "name": "chat",
            "startTimeUnixNano": str(t),
            "endTimeUnixNano": str(t + 3000),
            "attributes": attributes(root_attributes),
        },
        {
            "traceId": trace_id,
            "spanId": child,
            "parentSpanId": root,
            "name": "retrieve",
            "startTimeUnixNano": str(t + 1000),
            "endTimeUnixNano": str(t + 2000),
            "attributes": attributes(
                {KIND: "RETRIEVER", "retrieval.documents.0.document.id": f"d{n}"}
            ),
        },
    ]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def write_otlp(path: Path, requests: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    return path


def test_hostile_session_ids(tmp_path):
    values = [
        {"intValue": "7"},  # a number: its digits
        {"stringValue": ""},  # empty: no session
        {"stringValue": " \t"},  # blank: no session
        {"stringValue": "a\nb"},  # a line break would forge lines and tables
        {"stringValue": "x\u2028y"},  # a line separator too
        {"stringValue": "nul\u0000"},
        {"stringValue": "Lyon—été"},  # Unicode is an id like any other
        {"intValue": "7"},  # the same session as the first
        {"stringValue": "half \ud800"},  # a lone surrogate: no Unicode, no file holds it
    ]
    path = write_otlp(tmp_path / "t.jsonl", [otlp_turn(n, v) for n, v in enumerate(values)])
    out = tmp_path / "s.jsonl"
    done = run("traces", "extract", path, "-o", out, "--sessions")
    assert done.returncode == 0, done.stderr
    found = jsonl(out)
    assert [(c["id"], [t["content"] for t in c["turns"]]) for c in found] == [
        ("7", ["Q0", "A0", "Q7", "A7"]),
        ("Lyon—été", ["Q6", "A6"]),
    ]
    reasons = {s["trace_id"][-1]: s["reason"] for s in jsonl(tmp_path / "skipped.jsonl")}
    assert reasons == {
        "2": "no_session",
        "3": "no_session",
        "4": "unfit_session",
        "5": "unfit_session",
        "6": "unfit_session",
        "9": "not_unicode",
    }
    messages = [s["message"] for s in jsonl(tmp_path / "skipped.jsonl")]
    assert any("'a\\nb'" in m and "control character" in m for m in messages)


def test_a_huge_session_is_one_line_in_order_or_a_skip_past_the_line_limit(tmp_path):
    n = 3000
    order = list(range(n))
    random.Random(1).shuffle(order)  # the traces read in no order at all
    requests = [otlp_turn(i, {"stringValue": "big"}) for i in order]
    requests.append(otlp_turn(n, {"stringValue": "small"}))
    path = write_otlp(tmp_path / "t.jsonl", requests)
    (big, small) = read_sessions(path)
    assert big["id"] == "big" and len(big["turns"]) == 2 * n
    assert [t["content"] for t in big["turns"][::2]] == [f"Q{i}" for i in range(n)]
    assert small["turns"][0]["content"] == f"Q{n}"
    out = tmp_path / "s.jsonl"
    done = run(
        "traces", "extract", path, "-o", out, "--sessions",
        env={**__import__("os").environ, "JUDGE_MAX_LINE_MB": "0.1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [c["id"] for c in jsonl(out)] == ["small"]
    assert f"{n} traces skipped ({n} session_too_long)" in done.stdout
    skips = jsonl(tmp_path / "skipped.jsonl")
    assert len(skips) == n and "JUDGE_MAX_LINE_MB" in skips[0]["message"]


def test_a_trace_read_twice_is_one_turn_whatever_copy_comes_first():
    def row(n: int, answer: str, session: str = "s") -> dict:
        return {
            "trace_id": f"t{n}",
            "question": f"Q{n}",
            "answer": answer,
            "contexts": [],
            "retrieved_ids": [],
            "session_id": session,
            "start_time": f"2026-12-01T10:00:0{n}.000000Z",
        }

    lines = []
    for rows in (
        [row(1, "A1"), row(2, "first copy"), row(2, "second copy")],
        [row(2, "second copy"), row(1, "A1"), row(2, "first copy")],
    ):
        spool = SessionSpool()
        for r in rows:
            assert spool.add(r, fresh=True) is None
        spool.keep()
        lines.append([c.line for c in spool.conversations()])
        assert spool.duplicates == 1
        spool.close()
    assert lines[0] == lines[1]
    (conversation,) = [json.loads(line) for line in lines[0]]
    assert [t["content"] for t in conversation["turns"]] == ["Q1", "A1", "Q2", "first copy"]


def test_extract_refuses_nothing_new_and_says_so(chats, tmp_path):
    judged = tmp_path / "all.jsonl"
    judged.write_text("".join(json.dumps(c) + "\n" for c in expected(chats)))
    out = tmp_path / "s.jsonl"
    summary = extract(chats["path"], out, sessions=True, judged=judged_ids([judged]))
    assert out.read_text() == "" and summary.sessions == 0
    assert summary.judged_before == 6 and dict(summary.skipped) == {"no_session": 1}
