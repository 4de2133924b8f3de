"""The rows of traces grouped into conversations by their session id, one JSON line each:

    {"id": SESSION, "turns": [{"role": "user", "content": QUESTION},
                              {"role": "assistant", "content": ANSWER, "contexts": [...],
                               "retrieved_ids": [...], "trace_id": TRACE, "span_id": SPAN,
                               "query": QUERY, "tools_called": [...]}, ...]}

Each trace is one turn (its question, then its answer); the turns of a session in start
time order, ties broken by trace id; the sessions in the order of their first turn, ties
broken by session id. A trace is a turn once, however many times it is read.

The turns are spooled to a private temporary SQLite database on disk (SQLite deletes it
when it is closed) and read back sorted, one session at a time: the turns of a session can
be spread over days of traces, interleaved with thousands of other sessions, so no
session is known to be complete before the last trace is read; memory holds one session
(the largest) at a time, never all of them, and the output does not depend on the order
the traces were read in.
"""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.lines import LIMIT_VARIABLE, max_line_bytes, shown_limit
from judge.traces.rows import Skip
from judge.traces.spans import iso_utc


def session_problem(session: str) -> str | None:
    """Why a session id cannot name a conversation (control characters, line or paragraph
    separators: they would break or forge the lines and tables it is shown in), or None."""
    for n, char in enumerate(session):
        if unicodedata.category(char) in ("Cc", "Zl", "Zp"):
            return f"holds the control character {char!r} at character {n}"
    return None


def session_id_of(row: Mapping[str, Any]) -> str | None:
    """A row's session id; None when it has none or it is blank (white space only)."""
    session = row.get("session_id")
    if session is None or not str(session).strip():
        return None
    return str(session)


def turns_of(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A trace's row as two turns of its conversation: the user's question and the
    assistant's answer (with the contexts and ids it was given, its trace id, the span id of
    the span that gave the question and the answer, which scores sent back are parented to
    as a row's are, the retriever's query when it is recorded and is not the question, and
    the tool spans' calls when it has any); a turn the app failed (no answer), the user's
    question alone: the next turn's answer answers it too."""
    if row["answer"] is None:
        return [{"role": "user", "content": row["question"]}]
    assistant: dict[str, Any] = {
        "role": "assistant",
        "content": row["answer"],
        "contexts": row.get("contexts") or [],
        "retrieved_ids": row.get("retrieved_ids"),
        "trace_id": row["trace_id"],
    }
    if row.get("span_id") is not None:
        assistant["span_id"] = row["span_id"]
    if row.get("query") is not None:
        assistant["query"] = row["query"]
    if row.get("tools_called") is not None:  # the trace's tool spans: the turn's calls
        assistant["tools_called"] = row["tools_called"]
    return [{"role": "user", "content": row["question"]}, assistant]


@dataclass(frozen=True)
class Conversation:
    """One session as written: its id, its line of JSON (no newline), and per turn the
    trace id and the rankings of its TREC runs (the generator's, the retrievers')."""

    session_id: str
    line: str
    traces: list[tuple[str, list[str], list[str]]]


class SessionSpool:
    """Turns spooled to a temporary SQLite database, then read back a session at a time."""

    def __init__(self) -> None:
        # "": a private temporary database on disk, deleted when it is closed.
        self.db = sqlite3.connect("", isolation_level=None)
        self.db.execute("PRAGMA temp_store = FILE")
        self.db.execute("BEGIN")
        self.db.execute(
            "CREATE TABLE turns (trace_id TEXT PRIMARY KEY, session TEXT NOT NULL, "
            "start TEXT NOT NULL, fresh INTEGER NOT NULL, turns TEXT NOT NULL, "
            "runs TEXT NOT NULL)"
        )
        self.duplicates = 0  # traces read twice, spooled once

    def add(
        self, row: Mapping[str, Any], fresh: bool, runs: Sequence[Sequence[str]] = ((), ())
    ) -> Skip | None:
        """Spool one trace's row as a turn of its session; the reason when it cannot be
        one (no session id, or one that cannot name a conversation).

        Args:
            row: the trace's row (`judge.traces.rows.trace_row`, with its `query`).
            fresh: whether the turn makes its session worth writing (not judged before,
                started since): a session of no fresh turn is left out.
            runs: the turn's rankings for the TREC runs (generator's, retrievers').
        """
        trace_id = str(row["trace_id"])
        session = session_id_of(row)
        if session is None:
            return Skip(
                trace_id,
                "no_session",
                "the trace has no session id (session.id, gen_ai.conversation.id, or "
                "--map session_id=ATTRIBUTE): the conversation it is a turn of is unknown, "
                "and a turn judged without the turns before it would be judged wrongly",
            )
        problem = session_problem(session)
        if problem is not None:
            return Skip(
                trace_id,
                "unfit_session",
                f"the trace's session id {session!r} {problem}: it cannot name a "
                "conversation; fix the instrumentation, or map another attribute with "
                "--map session_id=ATTRIBUTE",
            )
        if str(row["start_time"]) == iso_utc(0):  # no span of the trace has a start time
            return Skip(
                trace_id,
                "no_start_time",
                "the trace's spans have no start time (a damaged export): its place among "
                "its session's turns is unknown, and a turn judged with the wrong turns "
                "before it would be judged wrongly",
            )
        turns = json.dumps(turns_of(row), ensure_ascii=False)[1:-1]
        start = str(row["start_time"])
        values = (session, start, int(fresh), turns, json.dumps([list(r) for r in runs]))
        before = self.db.execute(
            "SELECT session, start, turns FROM turns WHERE trace_id = ?", (trace_id,)
        ).fetchone()
        if before is None:
            self.db.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?)", (trace_id, *values))
            return None
        # A trace read twice (a file given twice, a trace split far apart in the files) is
        # one turn: of two copies that differ, the same one whatever the files' order.
        self.duplicates += 1
        if (session, start, turns) < tuple(before):
            self.db.execute(
                "UPDATE turns SET session = ?, start = ?, fresh = ?, turns = ?, runs = ? "
                "WHERE trace_id = ?",
                (*values, trace_id),
            )
        return None

    def sessions(self) -> Iterator[tuple[str, str, bool]]:
        """(session id, its first turn's start time, whether it has a fresh turn) of
        every session, in session id order."""
        self._index()
        yield from (
            (session, first, bool(fresh))
            for session, first, fresh in self.db.execute(
                "SELECT session, first, fresh FROM sessions ORDER BY session"
            )
        )

    def keep(self, sessions: set[str] | None = None) -> None:
        """Keep only the sessions with a fresh turn, and of them those in `sessions`."""
        self._index()
        self.db.execute("DELETE FROM sessions WHERE fresh = 0")
        if sessions is not None:
            self.db.execute("CREATE TEMP TABLE chosen (session TEXT PRIMARY KEY)")
            self.db.executemany("INSERT INTO chosen VALUES (?)", ((s,) for s in sessions))
            self.db.execute(
                "DELETE FROM sessions WHERE session NOT IN (SELECT session FROM chosen)"
            )

    def left_out(self) -> Iterator[tuple[str, bool]]:
        """(trace id, whether its session has a fresh turn) of every turn of the sessions
        not kept."""
        self._index()
        yield from (
            (trace_id, bool(fresh))
            for trace_id, fresh in self.db.execute(
                "SELECT t.trace_id, g.fresh FROM turns t JOIN (SELECT session, MAX(fresh) "
                "AS fresh FROM turns GROUP BY session) g ON g.session = t.session "
                "WHERE t.session NOT IN (SELECT session FROM sessions) ORDER BY t.trace_id"
            )
        )

    def conversations(self) -> Iterator[Conversation]:
        """The sessions kept, each as its line: in the order of their first turn (then
        of their id), their turns in start order (then trace id order)."""
        self._index()
        rows = self.db.execute(
            "SELECT t.session, t.trace_id, t.turns, t.runs FROM turns t "
            "JOIN sessions s ON s.session = t.session "
            "ORDER BY s.first, t.session, t.start, t.trace_id"
        )
        session: str | None = None
        pieces: list[str] = []
        traces: list[tuple[str, list[str], list[str]]] = []
        for name, trace_id, turns, runs in rows:
            if name != session:
                if session is not None:
                    yield self._conversation(session, pieces, traces)
                session, pieces, traces = name, [], []
            pieces.append(turns)
            generator, retriever = json.loads(runs)
            traces.append((trace_id, generator, retriever))
        if session is not None:
            yield self._conversation(session, pieces, traces)

    def close(self) -> None:
        """Close the database (SQLite deletes it)."""
        self.db.close()

    def _index(self) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT")
            self.db.execute(
                "CREATE TABLE sessions AS SELECT session, MIN(start) AS first, "
                "MAX(fresh) AS fresh FROM turns GROUP BY session"
            )
            self.db.execute("CREATE UNIQUE INDEX sessions_by_id ON sessions (session)")
            self.db.execute("CREATE INDEX turns_by_session ON turns (session, start, trace_id)")

    @staticmethod
    def _conversation(
        session: str, pieces: list[str], traces: list[tuple[str, list[str], list[str]]]
    ) -> Conversation:
        # The bytes json.dumps({"id": ..., "turns": [...]}) gives, without parsing the
        # turns again.
        line = (
            '{"id": ' + json.dumps(session, ensure_ascii=False) + ', "turns": ['
            + ", ".join(pieces) + "]}"
        )  # fmt: skip
        return Conversation(session, line, traces)


def too_long(conversation: Conversation) -> list[Skip]:
    """The skips of a conversation whose line is longer than judge reads (a line above
    `JUDGE_MAX_LINE_MB`, which judge eval would refuse), one per trace; empty when it fits."""
    limit = max_line_bytes()
    size = len(conversation.line.encode("utf-8"))
    if size <= limit:
        return []
    message = (
        f"the session {conversation.session_id!r} of {len(conversation.traces)} turns is "
        f"{size} bytes as one line, longer than {shown_limit(limit)}, the longest line judge "
        f"reads: raise {LIMIT_VARIABLE} (in MiB) for the extract and the eval"
    )
    return [Skip(trace_id, "session_too_long", message) for trace_id, _, _ in conversation.traces]
