"""Cache identity: keys name the server, replay under a chosen name, format migrations, mode."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import judge.cache.migrations
import judge.cache.store
from judge.aio import run_sync
from judge.cache.identity import DEFAULT, UNKNOWN, normalise_url, server_identity
from judge.cache.migrations import SCHEMA_VERSION
from judge.cache.store import Cache, CacheEntry, cache_key
from judge.errors import CacheError, CacheMiss, JudgeError
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.run.evaluate import evaluate
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cache import ask, llm, says, v1_copy

EMBED_MODEL = "openai/embed-fixture"  # the embedding model of fixtures/cache-v1/make_v1_cache.py


def embed(session: LLMSession, texts: list[str]) -> list[list[float]]:
    async def go() -> list[list[float]]:
        try:
            return await session.embed(texts)
        finally:
            await session.aclose()

    return run_sync(go())


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ((None, None), ("https://api.openai.com/v1", None)),  # the provider's own endpoint
        (("https://api.openai.com/v1", None), ("HTTPS://API.OpenAI.com:443/v1/", None)),
        (("http://Host:80/v1//", None), ("http://host/v1", None)),
        (("http://gpu1:8000/v1", None), ("http://user:pw@gpu1:8000/v1?key=x#top", None)),
        (("http://127.0.0.1:8000/v1", "gpu1"), ("http://127.0.0.1:9999/v1", "gpu1")),
        (("http://127.0.0.1:9999/v1", "http://GPU1:8000/v1/"), ("http://gpu1:8000/v1", None)),
    ],
)
def test_same_server_identity(one, other, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert server_identity("openai/m", *one) == server_identity("openai/m", *other)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"),  # two local servers
        ("http://localhost:8000/v1", "http://127.0.0.1:8000/v1"),  # hosts are not resolved
        ("http://gpu1:8000/v1", "http://gpu1:8000"),  # the path is kept
        ("http://gpu1:8000/v1", "https://gpu1:8000/v1"),
        (None, "http://localhost:8000/v1"),
    ],
)
def test_different_server_identity(one, other, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert server_identity("openai/m", one) != server_identity("openai/m", other)


def test_identity_rules_in_detail(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert server_identity("openai/m", None) == DEFAULT
    assert server_identity("anthropic/claude", "https://api.anthropic.com/") == DEFAULT
    # another provider's endpoint is not this provider's default
    assert server_identity("openai/m", "https://api.anthropic.com") == "https://api.anthropic.com"
    assert normalise_url("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"
    secret = server_identity("openai/m", "http://me:sk-SECRET@gpu1:8000/v1?api_key=sk-TWO")
    assert secret == "http://gpu1:8000/v1"  # credentials never reach a cache key
    assert server_identity("openai/m", "http://a:1/v1", " gpu1 ") == "gpu1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://LOCALHOST:8000/v1/")  # read by the openai SDK
    assert server_identity("openai/m", None) == "http://localhost:8000/v1"
    with pytest.raises(JudgeError, match=r"cache_as .* is empty"):
        LLM("openai/m", cache_as="  ")
    with pytest.raises(JudgeError, match="the port is not a number"):
        Embeddings("openai/e", api_base="http://gpu1:port/v1")


def test_two_servers_with_one_model_name_never_share_judgments(tmp_path):
    with (
        Cache(tmp_path / "c.sqlite") as cache,
        FakeLLMServer(chat=says("yes"), embed=lambda t: [[1.0, 0.0]] * len(t)) as first,
        FakeLLMServer(chat=says("no"), embed=lambda t: [[0.0, 1.0]] * len(t)) as second,
    ):

        def session(server: FakeLLMServer) -> LLMSession:
            embeddings = Embeddings(EMBED_MODEL, api_base=server.base_url, api_key="k")
            return LLMSession(llm(server), embeddings=embeddings, cache=cache)

        assert ask(session(first), "Is it?") == "yes"
        assert embed(session(first), ["text"]) == [[1.0, 0.0]]
        assert ask(session(second), "Is it?") == "no"  # not the first server's judgment
        assert embed(session(second), ["text"]) == [[0.0, 1.0]]
        assert ask(session(first), "Is it?") == "yes"  # each server's own entry is a hit
        assert embed(session(first), ["text"]) == [[1.0, 0.0]]
        assert first.count() == 2 and second.count() == 2
        assert len(cache) == 4
        servers = {e.request["server"] for e in cache.entries()}
        assert servers == {first.base_url.rstrip("/"), second.base_url.rstrip("/")}


def test_cache_as_replays_a_recording_through_another_address(tmp_path):
    def refuse(body: dict[str, Any]) -> str:
        raise AssertionError("a replay must not reach the server")

    with Cache(tmp_path / "c.sqlite") as cache:
        with FakeLLMServer(chat=says("yes")) as recorder:
            assert ask(LLMSession(llm(recorder, cache_as="gpu1"), cache=cache), "Q") == "yes"
        cache.mode = "replay"
        with FakeLLMServer(chat=refuse) as elsewhere:  # another random port
            named = LLMSession(llm(elsewhere, cache_as="gpu1"), cache=cache)
            assert ask(named, "Q") == "yes"
            # Its address was not recorded, but gpu1 was: the miss names it.
            with pytest.raises(CacheMiss, match=r"pass cache_as='gpu1' \(--cache-as gpu1\)"):
                ask(LLMSession(llm(elsewhere), cache=cache), "Q")
            assert elsewhere.count() == 0


def test_the_default_endpoint_named_or_not_is_one_identity(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with Cache(tmp_path / "c.sqlite") as cache:
        with FakeLLMServer(chat=says("yes")) as server:  # stands in for api.openai.com
            openai = llm(server, cache_as="https://api.openai.com/v1/")
            assert ask(LLMSession(openai, cache=cache), "Q") == "yes"
        cache.mode = "replay"  # nothing can be sent: a miss would be an error
        assert ask(LLMSession(llm(None), cache=cache), "Q") == "yes"
        assert [e.request["server"] for e in cache.entries()] == [DEFAULT]


def test_a_changed_server_does_not_resume_a_checkpoint(tmp_path):
    row = {
        "question": "Who created Python?",
        "answer": "Guido van Rossum created Python.",
        "contexts": ["Python was created by Guido van Rossum."],
    }
    checkpoint = tmp_path / "checkpoint.jsonl"
    with (
        FakeLLMServer(chat=heuristic_judge) as first,
        FakeLLMServer(chat=heuristic_judge) as second,
    ):
        for server in (first, second, second):
            evaluate(
                [row],
                metrics=["faithfulness"],
                llm=llm(server),
                checkpoint=checkpoint,
                progress=False,
            )
        assert first.count() > 0 and second.count() == first.count()  # resumed once only


def raw_rows(path: Path) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT key, request, response FROM judgments ORDER BY key").fetchall()
    finally:
        db.close()


def test_the_committed_v1_cache_migrates_and_keeps_every_entry(tmp_path):
    path = v1_copy(tmp_path)
    before = raw_rows(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1
    assert len(before) == 6 and all('"server"' not in request for _, request, _ in before)
    with Cache(path) as cache:
        entries = list(cache.entries())
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert {e.kind for e in entries} == {"chat", "embedding"} and len(entries) == 6
    assert all(e.request["server"] == UNKNOWN and e.key == cache_key(e.request) for e in entries)
    assert not {e.key for e in entries} & {key for key, _, _ in before}  # keys recomputed
    recorded = {}  # the format-1 responses, by their request upgraded to format 2
    for _, request, response in before:
        upgraded = {**json.loads(request), "server": UNKNOWN}
        recorded[json.dumps(upgraded, sort_keys=True)] = json.loads(response)
    assert {json.dumps(e.request, sort_keys=True): e.response for e in entries} == recorded
    with Cache(path) as again:  # a migrated file is opened as it is
        assert sorted(e.key for e in again.entries()) == sorted(e.key for e in entries)


def test_format_3_keeps_every_row_in_a_rowid_table_with_an_index_of_keys(tmp_path):
    path = v1_copy(tmp_path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    judge.cache.migrations.m002_server_in_keys(db)
    db.execute("PRAGMA user_version=2")
    db.execute("COMMIT")
    columns = "key, kind, request, response, model, resolved_model, prompt, prompt_version, mode"
    query = f"SELECT {columns}, usage, created FROM judgments ORDER BY key"
    before = db.execute(query).fetchall()
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.close()
    assert len(before) == 6
    with Cache(path) as cache:
        assert len(cache) == 6
        assert cache.get_response(before[0][0]) == json.loads(before[0][3])
    db = sqlite3.connect(path)
    assert db.execute(query).fetchall() == before
    (table,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'judgments'").fetchone()
    assert "WITHOUT ROWID" not in table and "key TEXT NOT NULL PRIMARY KEY" in table
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # Vacuumed after the copy: no free pages left by the old table (only the new index's).
    assert db.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert db.execute("PRAGMA page_count").fetchone()[0] <= pages + 1
    plan = db.execute("EXPLAIN QUERY PLAN SELECT response FROM judgments WHERE key = ?", ("k",))
    assert "USING INDEX sqlite_autoindex_judgments" in " ".join(str(r) for r in plan.fetchall())
    db.close()


# Floats whose shortest decimal text is long, tiny, negative zero, subnormal: the bytes
# must give back exactly what the JSON gives.
AWKWARD = [0.1, -0.0, 1e-300, 5e-324, 0.30000000000000004, -1.7976931348623157e308, 1 / 3]


def embedding_entry(text: str, vector: list) -> CacheEntry:
    request = {"kind": "embedding", "model": EMBED_MODEL, "server": UNKNOWN, "text": text}
    return CacheEntry(cache_key(request), "embedding", request, vector, EMBED_MODEL)


def test_an_embedding_is_read_from_its_float64_bytes_and_stays_readable_json(tmp_path):
    path = tmp_path / "c.sqlite"
    ints = embedding_entry("ints", [1, 0])  # not all floats: kept as JSON only
    with Cache(path) as cache:
        cache.put_many([embedding_entry("awkward", AWKWARD), ints])
    db = sqlite3.connect(path)
    rows = dict(db.execute("SELECT request, vector FROM judgments").fetchall())
    (awkward_json,) = db.execute(
        "SELECT response FROM judgments WHERE vector IS NOT NULL"
    ).fetchone()
    db.close()
    assert json.loads(awkward_json) == AWKWARD  # the response column is plain JSON
    blobs = [b for b in rows.values() if b is not None]
    assert len(blobs) == 1 and len(blobs[0]) == 8 * len(AWKWARD)
    with Cache(path) as cache:
        got = cache.get_response(embedding_entry("awkward", AWKWARD).key)
        assert isinstance(got, np.ndarray) and not got.flags.writeable  # shared: read-only
        assert [x.hex() for x in got.tolist()] == [x.hex() for x in AWKWARD]  # bit for bit
        assert cache.get_response(ints.key) == [1, 0]
        assert all(type(x) is int for x in cache.get_response(ints.key))
        exported = tmp_path / "out.jsonl"
        cache.export_jsonl(exported)
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sorted(line["response"] for line in lines) == sorted([AWKWARD, [1, 0]])
    assert all("vector" not in line for line in lines)
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE judgments SET response = '[9.0]' WHERE vector IS NOT NULL"
    ).connection.commit()
    db.close()
    with Cache(path) as cache:  # a lookup reads the bytes, not the JSON
        assert cache.get_response(embedding_entry("awkward", AWKWARD).key).tolist() == AWKWARD
    db = sqlite3.connect(path)
    db.execute("UPDATE judgments SET vector = x'0102' WHERE vector IS NOT NULL").connection.commit()
    db.close()
    with Cache(path) as cache:  # bytes cut short (damaged): a miss, never another value
        assert cache.get_response(embedding_entry("awkward", AWKWARD).key) is None
        assert cache.damaged == 1


def test_the_vacuum_after_a_rebuild_gives_way_to_a_writer_at_once(tmp_path):
    path = tmp_path / "c.sqlite"
    Cache(path).close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process writing
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    started = time.monotonic()
    judge.cache.migrations.compact(db)  # skipped, not waited for, not raised
    assert time.monotonic() - started < 5
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000
    writer.execute("ROLLBACK")
    db.close()
    writer.close()


def test_an_upgrade_stopped_by_another_process_says_so(tmp_path, monkeypatch):
    def locked(db: sqlite3.Connection) -> list[str]:
        raise sqlite3.OperationalError("database is locked")

    path = v1_copy(tmp_path)
    monkeypatch.setattr(judge.cache.store, "migrate", locked)
    with pytest.raises(CacheError, match=r"unchanged\. Another judge process is probably"):
        Cache(path)


def test_format_3_adds_the_bytes_of_vectors_recorded_before(tmp_path):
    path = tmp_path / "c.sqlite"
    entries = [embedding_entry(f"t{i}", [float(i), 0.5, -i / 7]) for i in range(2500)]
    entries.append(embedding_entry("ints", [1, 0]))
    damaged = embedding_entry("damaged", [0.5])
    db = sqlite3.connect(path, isolation_level=None)  # a format-2 file, as format 2 wrote it
    for migration in judge.cache.migrations.MIGRATIONS[:2]:
        migration(db)
    db.execute("PRAGMA user_version=2")
    db.execute(f"PRAGMA application_id={0x4A444745}")
    columns = "key, kind, request, response, model, created"
    db.executemany(
        f"INSERT INTO judgments ({columns}) VALUES (?, ?, ?, ?, ?, 0)",
        [(e.key, e.kind, json.dumps(e.request), json.dumps(e.response), e.model) for e in entries],
    )
    db.execute(
        f"INSERT INTO judgments ({columns}) VALUES (?, ?, ?, '[0.5', ?, 0)",
        (damaged.key, damaged.kind, json.dumps(damaged.request), damaged.model),
    )
    db.close()
    with Cache(path) as cache:  # one damaged entry does not stop the upgrade
        got = [cache.get_response(e.key) for e in entries]
        assert len(cache) == len(entries) + 1  # kept as it was, without bytes
    assert [v.tolist() for v in got[:-1]] == [e.response for e in entries[:-1]]
    assert got[-1] == [1, 0] and type(got[-1]) is list  # ints: read from the JSON
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM judgments WHERE vector IS NULL").fetchone()[0] == 2
    # The bytes come before the JSON in a row: a lookup of a vector reads no further.
    (table,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'judgments'").fetchone()
    assert table.index("vector BLOB") < table.index("response TEXT") < table.index("request")
    db.close()


def test_migrated_entries_serve_only_a_run_that_claims_the_unknown_server(tmp_path):
    with Cache(v1_copy(tmp_path)) as migrated:
        stored = {e.request["text"]: e.response for e in migrated.entries() if e.kind != "chat"}
    with Cache(tmp_path / "v1.sqlite", mode="replay") as cache, FakeLLMServer() as server:

        def session(cache_as: str | None) -> LLMSession:
            embeddings = Embeddings(EMBED_MODEL, api_base=server.base_url, cache_as=cache_as)
            return LLMSession(llm(server, cache_as=cache_as), embeddings=embeddings, cache=cache)

        verdicts = [ask(session(UNKNOWN), q) for q in ("Is the sky blue?", "Is water dry?")]
        assert verdicts == ["yes", "no"]
        texts = ["blue sky", "dry water", "even two"]
        assert embed(session(UNKNOWN), texts) == [stored[t] for t in texts]
        with pytest.raises(CacheMiss):  # recorded with an unknown server: not this one
            ask(session(None), "Is the sky blue?")
        assert server.count() == 0


def test_a_failed_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    def broken(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE judgments ADD COLUMN extra TEXT")
        raise sqlite3.OperationalError("disk I/O error")

    path = v1_copy(tmp_path)
    before = raw_rows(path)
    monkeypatch.setattr(
        judge.cache.migrations, "MIGRATIONS", (*judge.cache.migrations.MIGRATIONS, broken)
    )
    monkeypatch.setattr(judge.cache.store, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    failed = rf"from format 1 to {SCHEMA_VERSION + 1} failed .*left the file unchanged\. Check"
    with pytest.raises(CacheError, match=failed):
        Cache(path)
    assert raw_rows(path) == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


def test_a_cache_newer_than_the_code_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    Cache(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    newer = rf"newer judge \(cache format {SCHEMA_VERSION + 1}; .* up to {SCHEMA_VERSION}\)"
    with pytest.raises(CacheError, match=newer):
        Cache(path)


def test_a_format_1_jsonl_export_imports_under_the_unknown_server(tmp_path):
    request = {"kind": "embedding", "model": EMBED_MODEL, "text": "blue sky"}
    line = {"key": cache_key(request), "kind": "embedding", "request": request}
    line |= {"response": [1.0], "model": EMBED_MODEL, "created": 0.0}
    (tmp_path / "v1.jsonl").write_text(json.dumps(line) + "\n")
    with Cache(tmp_path / "c.sqlite") as cache:
        assert cache.import_jsonl(tmp_path / "v1.jsonl") == 1
        (entry,) = cache.entries()
    assert entry.request == {**request, "server": UNKNOWN} and entry.key == cache_key(entry.request)
    (tmp_path / "bad.jsonl").write_text(json.dumps({**line, "response": [2.0], "key": "0" * 64}))
    with Cache(tmp_path / "c.sqlite") as cache, pytest.raises(CacheError, match=":1: the key"):
        cache.import_jsonl(tmp_path / "bad.jsonl")


def test_cache_stats_lists_the_server_identities(tmp_path):
    path = v1_copy(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "judge", "cache", "stats", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["by_server"] == {UNKNOWN: 6}
