"""The cache's integrity: every entry's checksums checked on read, damage a miss (never a
wrong value, never a crash), `judge cache verify|repair`, read-only and missing files, and a
cache that cannot store stopping the run."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import subprocess
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

import judge.cache.entries
import judge.cache.migrations
from judge.aio import run_sync
from judge.cache.migrations import SCHEMA_VERSION
from judge.cache.store import Cache, CacheEntry, cache_key
from judge.cache.write_batch import WriteBatch
from judge.errors import CacheError, CacheMiss, CacheStoreError
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.run.evaluate import evaluate
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run


class Verdict(BaseModel):
    verdict: str


def says(verdict: str) -> Any:
    return lambda body: json.dumps({"verdict": verdict})


def chat_entry(i: int, verdict: str = "yes") -> CacheEntry:
    request = {"kind": "chat", "server": "s", "model": "m", "messages": [f"q{i}"]}
    response = {"choices": [{"verdict": verdict}]}
    return CacheEntry(cache_key(request), "chat", request, response, "m")


def vector_entry(i: int, dims: int = 4) -> CacheEntry:
    request = {"kind": "embedding", "server": "s", "model": "e", "text": f"t{i}"}
    vector = [float(i) + j / 8 for j in range(dims)]
    return CacheEntry(cache_key(request), "embedding", request, vector, "e")


def sql(path: Path, statement: str, *params: Any) -> None:
    db = sqlite3.connect(path)
    db.execute(statement, params)
    db.commit()
    db.close()


def session_for(server: FakeLLMServer, cache: Cache) -> LLMSession:
    # One identity for every fake server (each has its own port): a recording replays.
    llm = LLM("openai/m", api_base=server.base_url, api_key="k", cache_as="fake")
    embeddings = Embeddings("openai/e", api_base=server.base_url, api_key="k", cache_as="fake")
    return LLMSession(llm, embeddings=embeddings, cache=cache, memo_bytes=0)


def ask(session: LLMSession, question: str) -> str:
    async def go() -> str:
        try:
            (reply,) = await session.chat([{"role": "user", "content": question}], Verdict)
            return reply.verdict
        finally:
            await session.aclose()

    return run_sync(go())


def embed(session: LLMSession, texts: list[str]) -> list[list[float]]:
    async def go() -> list[list[float]]:
        try:
            return await session.embed(texts)
        finally:
            await session.aclose()

    return run_sync(go())


# Damage that leaves the row readable by SQLite: each must be found by its checksum.
CHAT_DAMAGE = {
    "other JSON": 'UPDATE judgments SET response = \'{"choices":[{"verdict":"no"}]}\'',
    "not JSON": 'UPDATE judgments SET response = \'{"choices":[{"verd\'',
    "no checksum": "UPDATE judgments SET response_crc = NULL",
    "checksum changed": "UPDATE judgments SET response_crc = response_crc + 1",
}


@pytest.mark.parametrize("damage", sorted(CHAT_DAMAGE))
def test_a_damaged_judgment_is_asked_again_and_rewritten(tmp_path, damage):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(chat=says("yes")) as server, Cache(path) as cache:
        assert ask(session_for(server, cache), "Is it?") == "yes"
        sql(path, CHAT_DAMAGE[damage])
        assert ask(session_for(server, cache), "Is it?") == "yes"  # not "no", not a crash
        assert server.count() == 2 and cache.damaged == 1
        assert ask(session_for(server, cache), "Is it?") == "yes"
        assert server.count() == 2 and cache.damaged == 1  # rewritten: a good hit again


@pytest.mark.parametrize("damage", sorted(CHAT_DAMAGE))
def test_a_damaged_judgment_in_replay_is_a_miss_that_says_damaged(tmp_path, damage):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(chat=says("yes")) as server, Cache(path) as cache:
        ask(session_for(server, cache), "Is it?")
        (key,) = (e.key for e in cache.entries())
        sql(path, CHAT_DAMAGE[damage])
        cache.mode = "replay"
        with pytest.raises(CacheMiss, match=rf"{key[:16]}.*damaged") as caught:
            ask(session_for(server, cache), "Is it?")
        assert caught.value.key == key
        assert server.count() == 1 and cache.damaged == 1


VECTOR_DAMAGE = {
    "bytes changed": "UPDATE judgments SET vector = zeroblob(32)",
    "bytes cut short": "UPDATE judgments SET vector = substr(vector, 1, 30)",
    "not bytes": "UPDATE judgments SET vector = 'abc'",
    "checksum changed": "UPDATE judgments SET vector_crc = vector_crc + 1",
}


@pytest.mark.parametrize("damage", sorted(VECTOR_DAMAGE))
def test_damaged_vector_bytes_are_a_miss_asked_again(tmp_path, damage):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer() as server, Cache(path) as cache:
        (vector,) = embed(session_for(server, cache), ["blue sky"])
        sql(path, VECTOR_DAMAGE[damage])
        assert embed(session_for(server, cache), ["blue sky"]) == [vector]
        assert server.count("/v1/embeddings") == 2 and cache.damaged == 1
        cache.mode = "replay"
        assert embed(session_for(server, cache), ["blue sky"]) == [vector]  # rewritten
        sql(path, VECTOR_DAMAGE[damage])
        with pytest.raises(CacheMiss, match="damaged"):
            embed(session_for(server, cache), ["blue sky"])


def test_get_checks_the_response_and_the_vector(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        cache.put_many([chat_entry(1), vector_entry(2), chat_entry(3)])
        sql(path, "UPDATE judgments SET response = '[1.5]' WHERE kind = 'embedding'")
        sql(path, "UPDATE judgments SET response = 'x' WHERE key = ?", chat_entry(3).key)
        assert cache.get(chat_entry(1).key) == chat_entry(1)
        assert cache.get(vector_entry(2).key) is None  # its JSON no longer matches
        assert cache.get(chat_entry(3).key) is None
        assert cache.damaged == 2
        # The fast path reads the (intact) vector bytes only: the same floats.
        assert cache.get_response(vector_entry(2).key).tolist() == vector_entry(2).response
        cache.mode = "replay"
        with pytest.raises(CacheMiss, match=rf"{chat_entry(3).key[:16]}.*damaged"):
            cache.get(chat_entry(3).key)
        with pytest.raises(CacheError, match=r"damaged.*judge cache repair"):
            list(cache.entries())  # an export never carries a damaged value on


def test_a_damaged_fallback_entry_is_a_miss_and_a_good_one_elsewhere_serves(tmp_path):
    own, other = tmp_path / "own.sqlite", tmp_path / "other.sqlite"
    with Cache(other) as cache:
        cache.put_many([chat_entry(1), chat_entry(2)])
    with Cache(own) as cache:
        cache.put(chat_entry(1))
    sql(own, "UPDATE judgments SET response = '{}'")  # own copy damaged: the fallback's serves
    sql(other, "UPDATE judgments SET response = '{}' WHERE key = ?", chat_entry(2).key)
    with Cache(own, fallbacks=[other]) as cache:
        assert cache.get_response(chat_entry(1).key) == chat_entry(1).response
        assert cache.get_response(chat_entry(2).key) is None
        assert cache.damaged == 2
        cache.mode = "replay"
        with pytest.raises(CacheMiss, match=rf"{chat_entry(2).key[:16]}.*damaged"):
            cache.get_response(chat_entry(2).key)


def test_a_row_sqlite_cannot_decode_is_damaged_not_a_crash(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        cache.put(chat_entry(1))
        sql(path, "UPDATE judgments SET response = CAST(x'7b22ff22' AS TEXT)")  # bad UTF-8
        assert cache.get_response(chat_entry(1).key) is None
        assert cache.get(chat_entry(1).key) is None
        assert cache.damaged == 2


def format_3_file(path: Path, entries: list[CacheEntry], raw: list[tuple[Any, ...]] = ()) -> None:
    """A format-3 cache, as format 3 wrote it (responses as JSON, vectors as bytes)."""
    db = sqlite3.connect(path, isolation_level=None)
    for migration in judge.cache.migrations.MIGRATIONS[:3]:
        migration(db)
    db.execute("PRAGMA user_version=3")
    db.execute(f"PRAGMA application_id={0x4A444745}")
    columns = "key, kind, request, response, model, created, vector"
    rows = [
        (
            e.key,
            e.kind,
            json.dumps(e.request),
            json.dumps(e.response),
            e.model,
            judge.cache.entries.vector_blob(e.response) if e.kind == "embedding" else None,
        )
        for e in entries
    ]
    db.executemany(f"INSERT INTO judgments ({columns}) VALUES (?, ?, ?, ?, ?, 0, ?)", [*rows, *raw])
    db.close()


def test_format_4_adds_checksums_to_a_format_3_file(tmp_path):
    path = tmp_path / "c.sqlite"
    good = [chat_entry(1), chat_entry(2), vector_entry(3), vector_entry(4)]
    broken_json, wrong_vector = chat_entry(5), vector_entry(6)
    format_3_file(
        path,
        good,
        [
            (broken_json.key, "chat", "{}", '{"choices":[', "m", None),
            (
                wrong_vector.key,
                "embedding",
                "{}",
                "[1.0]",
                "e",
                judge.cache.entries.vector_blob([2.0]),
            ),
        ],
    )
    with Cache(path) as cache:
        assert len(cache) == 6  # nothing dropped by the upgrade
        for e in good:
            got = cache.get_response(e.key)
            assert (got.tolist() if isinstance(got, np.ndarray) else got) == e.response
        # Damage from before the upgrade is not blessed with a checksum.
        assert cache.get_response(broken_json.key) is None
        assert cache.get_response(wrong_vector.key) is None
        assert cache.damaged == 2
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    (table,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'judgments'").fetchone()
    # The checksums come before the bytes and the JSON: a lookup reads no further.
    order = [table.index(c) for c in ("response_crc", "vector_crc", "vector BLOB", "response T")]
    assert order == sorted(order) and table.index("response T") < table.index("request")
    key, crc = db.execute(
        "SELECT key, response_crc FROM judgments WHERE key = ?", (good[0].key,)
    ).fetchone()
    db.close()
    assert crc == zlib.crc32(json.dumps(good[0].response).encode(), zlib.crc32(key.encode()))


def judge_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run(*args, cwd=cwd)


def test_cache_verify_and_repair(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        cache.put_many([chat_entry(i) for i in range(6)] + [vector_entry(i) for i in range(4)])
    clean = judge_cli("cache", "verify", str(path))
    assert clean.returncode == 0, clean.stderr
    assert "10 entries" in clean.stdout and "0 damaged" in clean.stdout
    sql(path, "UPDATE judgments SET response = '{}' WHERE key = ?", chat_entry(0).key)
    sql(path, "UPDATE judgments SET response = '{' WHERE key = ?", chat_entry(1).key)
    sql(path, "UPDATE judgments SET response = 'x' WHERE key = ?", chat_entry(2).key)
    sql(path, "UPDATE judgments SET vector = x'00' WHERE key = ?", vector_entry(0).key)
    damaged = judge_cli("cache", "verify", str(path))
    assert damaged.returncode == 2
    assert "4 damaged" in damaged.stdout
    lines = [line for line in damaged.stdout.splitlines() if line.startswith("  ")]
    assert sorted(lines) == sorted(
        [
            "  3 with a response that does not match its checksum",
            "  1 with vector bytes that do not match their checksum",
        ]
    )
    repaired = judge_cli("cache", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    assert "dropped 4 damaged entries" in repaired.stdout and "6 kept" in repaired.stdout
    assert judge_cli("cache", "verify", str(path)).returncode == 0
    with Cache(path) as cache:
        assert len(cache) == 6 and cache.get(chat_entry(3).key) == chat_entry(3)


def test_cache_verify_reports_a_file_sqlite_finds_damaged(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        cache.put_many([chat_entry(i) for i in range(300)])
    db = sqlite3.connect(path)
    db.execute("PRAGMA writable_schema=ON")
    # The index of keys loses its entries (as when its pages are overwritten).
    page = db.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_judgments_1'"
    ).fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(path, "r+b") as f:
        f.seek((page - 1) * size + 8)
        f.write(b"\xff" * 64)
    done = judge_cli("cache", "verify", str(path))
    assert done.returncode == 2
    assert "SQLite integrity check" in done.stdout
    repaired = judge_cli("cache", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    assert judge_cli("cache", "verify", str(path)).returncode == 0


def test_replay_of_a_missing_cache_is_a_usage_error_that_creates_nothing(tmp_path):
    missing = tmp_path / "nowhere" / "missing.sqlite"
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"question": "q", "answer": "a", "contexts": ["c"]}) + "\n")
    done = judge_cli(
        "eval", str(data), "--model", "openai/m", "--replay", "--cache", str(missing),
        "--out", str(tmp_path / "out"), "--metrics", "faithfulness",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--cache {missing} does not exist" in done.stderr
    assert "damaged" not in done.stderr and "Traceback" not in done.stderr
    assert not missing.parent.exists()
    for action in ("verify", "repair"):
        done = judge_cli("cache", action, str(missing))
        assert done.returncode == 2 and "no such cache file" in done.stderr
    assert not missing.parent.exists()


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder on a read-only file system (a tmpfs remounted read-only: needs root), with
    a healthy cache holding one judgment of "Is it?" recorded from a fake server."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                      capture_output=True).returncode:  # fmt: skip
        pytest.skip("cannot mount a tmpfs here")
    try:
        with FakeLLMServer(chat=says("yes")) as server, Cache(folder / "c.sqlite") as cache:
            ask(session_for(server, cache), "Is it?")
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_read_only_cache_replays_and_a_live_run_is_told_it_cannot_store(read_only_folder):
    path = read_only_folder / "c.sqlite"
    with FakeLLMServer(chat=says("no")) as server:
        with Cache(path, mode="replay") as cache:
            assert ask(session_for(server, cache), "Is it?") == "yes"
            with pytest.raises(CacheMiss):
                ask(session_for(server, cache), "Is it not?")
            with pytest.raises(CacheError, match="read-only"):
                cache.mode = "read-write"
        with pytest.raises(CacheError) as caught:
            Cache(path)
        message = str(caught.value)
        assert str(path) in message and "read-only" in message and "--no-cache" in message
        assert "damaged" not in message
        assert server.count() == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a file whatever its mode")
def test_a_cache_file_without_write_permission_replays(tmp_path):
    path = tmp_path / "c.sqlite"
    with FakeLLMServer(chat=says("yes")) as server, Cache(path) as cache:
        ask(session_for(server, cache), "Is it?")
    path.chmod(0o444)
    with Cache(path, mode="replay") as cache, FakeLLMServer() as server:
        assert ask(session_for(server, cache), "Is it?") == "yes"
    with pytest.raises(CacheError, match=r"read-only.*--no-cache"):
        Cache(path)


def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: Cache, rows: list[tuple[Any, ...]]) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Cache, "_store", full)


def test_a_failure_to_store_is_a_cache_store_error(tmp_path, monkeypatch):
    full_disk(monkeypatch)
    with Cache(tmp_path / "c.sqlite") as cache, pytest.raises(CacheStoreError, match="full"):
        cache.put(chat_entry(1))


def test_a_failed_batched_write_is_not_lost(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "c.sqlite")
    batch = WriteBatch(cache)

    async def turns() -> None:
        batch.put(chat_entry(1), alone=False)
        full_disk(monkeypatch)
        await asyncio.sleep(0)  # the flush of the next turn fails
        with pytest.raises(CacheStoreError, match="not stored"):
            batch.get_response(chat_entry(2).key)  # the next lookup stops the run
        with pytest.raises(CacheStoreError):  # raised once more at the end, never forgotten
            batch.put(chat_entry(3), alone=False)
            batch.flush()

    asyncio.run(turns())


def rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"s{i}",
            "question": f"What is used in project {i}?",
            "answer": f"Python is used in project {i}. Python is fast.",
            "contexts": [f"Python is used in project {i}.", "Bananas are yellow."],
        }
        for i in range(n)
    ]


def test_a_cache_that_cannot_store_stops_the_run_at_once(tmp_path, monkeypatch):
    checkpoint = tmp_path / "ckpt.jsonl"
    with FakeLLMServer(chat=heuristic_judge) as server:
        llm = LLM("openai/m", api_base=server.base_url, api_key="k", max_concurrency=4)
        evaluate(rows(3), metrics=["faithfulness"], llm=llm, cache=tmp_path / "c.sqlite",
                 checkpoint=checkpoint, progress=False)  # fmt: skip
        before = server.count()
        full_disk(monkeypatch)
        with pytest.raises(CacheStoreError, match="full"):
            evaluate(rows(200), metrics=["faithfulness"], llm=llm, cache=tmp_path / "c.sqlite",
                     checkpoint=checkpoint, progress=False)  # fmt: skip
        # Stopped at once: a few requests in flight, not one per remaining row.
        assert server.count() - before <= 3 * 4 * 2
    assert len(checkpoint.read_text().splitlines()) >= 3  # what was done is kept


def test_judge_eval_on_a_full_cache_disk_exits_2_with_one_line(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
                      capture_output=True).returncode:  # fmt: skip
        pytest.skip("cannot mount a tmpfs here")
    try:
        data = tmp_path / "data.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows(300)))
        with FakeLLMServer(chat=heuristic_judge) as server:
            done = judge_cli(
                "eval", str(data), "--model", "openai/m", "--api-base", server.base_url,
                "--api-key", "k", "--cache", str(folder / "c.sqlite"), "--metrics",
                "faithfulness", "--out", str(tmp_path / "out"), "--no-progress",
            )  # fmt: skip
            sent = server.count()
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("judge: error:") and "full" in line and "rerun" in line
        assert sent < 300  # not every row's requests: the run stopped
        assert (tmp_path / "out" / ".checkpoint.jsonl").is_file()
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def scored(result: Any) -> list[tuple[dict[str, float], dict[str, str]]]:
    return [(dict(r.scores), dict(r.errors)) for r in result.rows]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_cache_damaged_at_random_places_never_changes_a_score_without_an_error(tmp_path, seed):
    from bench.robustness.cache_damage import METRICS, damage, samples

    data = samples(40)
    clean = tmp_path / "clean.sqlite"
    with FakeLLMServer(chat=heuristic_judge) as server:
        llm = LLM("openai/j", api_base=server.base_url, api_key="k", cache_as="fake")
        embeddings = Embeddings("openai/e", api_base=server.base_url, api_key="k", cache_as="fake")
        options: dict[str, Any] = {"metrics": METRICS, "llm": llm, "embeddings": embeddings}
        with Cache(clean) as cache:  # closed: every entry in the file, none in its WAL
            reference = scored(evaluate(data, cache=cache, progress=False, **options))
        compared = 0
        for mode in ("read-write", "replay"):
            copy = tmp_path / f"{mode}.sqlite"
            copy.write_bytes(clean.read_bytes())
            damage(copy, places=20, size=64, seed=seed)
            try:
                with Cache(copy, mode=mode) as cache:  # type: ignore[arg-type]
                    got = scored(evaluate(data, cache=cache, progress=False, **options))
            except CacheError as exc:  # unreadable or unwritable: said, nothing served
                assert "damaged" in str(exc)
                continue
            compared += 1
            for (want, _), (scores, errors) in zip(reference, got, strict=True):
                for metric, value in scores.items():
                    if not (
                        value == want[metric] or (math.isnan(value) and math.isnan(want[metric]))
                    ):
                        assert metric in errors, (mode, metric, value, want[metric])
        assert compared  # the seeds leave a file SQLite opens: the test compares scores


def test_judge_eval_says_how_many_damaged_entries_it_passed_over(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(2)))
    cache = tmp_path / "c.sqlite"
    with FakeLLMServer(chat=heuristic_judge) as server:
        command = ["eval", str(data), "--model", "openai/m", "--api-base", server.base_url,
                   "--api-key", "k", "--cache", str(cache), "--metrics", "faithfulness",
                   "--out", str(tmp_path / "out"), "--no-progress"]  # fmt: skip
        assert judge_cli(*command).returncode == 0
        sent = server.count()
        sql(cache, "UPDATE judgments SET response = '{\"choices\":[]}'")
        again = judge_cli(*command)
        assert again.returncode == 0, again.stderr
        assert server.count() == 2 * sent  # every entry asked for again
        assert f"{sent} damaged entries of the cache {cache}" in again.stderr
        assert "judge cache verify" in again.stderr


def leaf_pages(path: Path, name: str) -> list[tuple[int, int]]:
    """The leaf pages of a table or index: (page number, cells on it), in page order."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
    pages = db.execute(
        "SELECT pageno, ncell FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
        (name,),
    ).fetchall()
    db.close()
    return pages


def overwrite(path: Path, pages: list[int], at: int, data: bytes) -> None:
    size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as f:
        for page in pages:
            f.seek((page - 1) * size + at)
            f.write(data)


def test_repair_of_a_damaged_key_index_with_damaged_entries(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        cache.put_many([chat_entry(i) for i in range(3000)])
    for i in range(0, 3000, 7):  # changed behind their checksums
        sql(path, "UPDATE judgments SET response = '{}' WHERE key = ?", chat_entry(i).key)
    index = [page for page, _ in leaf_pages(path, "sqlite_autoindex_judgments_1")]
    overwrite(path, index[len(index) // 3 :][:3], 20, b"\x07" * 300)  # cells of 3 index pages
    assert judge_cli("cache", "verify", str(path)).returncode == 2
    repaired = judge_cli("cache", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    good = [chat_entry(i) for i in range(3000) if i % 7]
    assert f"dropped {3000 - len(good)} damaged entries, {len(good)} kept" in repaired.stdout
    verified = judge_cli("cache", "verify", str(path))
    assert verified.returncode == 0, verified.stdout
    with Cache(path, mode="replay") as cache:
        assert sorted(e.key for e in cache.entries()) == sorted(e.key for e in good)
        assert all(cache.get(e.key) == e for e in good)


def damaged_format_3_file(path: Path) -> tuple[list[CacheEntry], int]:
    """A format-3 cache of 2,000 judgments and one entry damaged before format 4 (its
    response not JSON), two of its table's leaf pages overwritten: its entries and how many
    of them are on the overwritten pages."""
    entries = [chat_entry(i) for i in range(2000)]
    broken = chat_entry(5000)
    format_3_file(path, entries, [(broken.key, "chat", "{}", '{"choices":[', "m", None)])
    leaves = leaf_pages(path, "judgments")
    hit = leaves[len(leaves) // 2 :][:2]
    overwrite(path, [page for page, _ in hit], 0, b"\xff" * 16)  # their page headers
    return entries, sum(cells for _, cells in hit)


def test_opening_a_damaged_old_cache_says_damaged_and_how_to_repair(tmp_path):
    path = tmp_path / "c.sqlite"
    damaged_format_3_file(path)
    with pytest.raises(CacheError) as caught:
        Cache(path)
    message = str(caught.value)
    assert "damaged" in message and f"judge cache repair {path}" in message
    assert "writable" not in message and "new path" not in message
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 3


def test_repair_of_a_damaged_old_cache_rebuilds_it_in_format_4(tmp_path):
    path = tmp_path / "c.sqlite"
    entries, lost = damaged_format_3_file(path)
    assert 0 < lost < 2000
    repaired = judge_cli("cache", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    kept = 2000 - lost
    assert f"dropped {lost + 1} damaged entries, {kept} kept" in repaired.stdout
    verified = judge_cli("cache", "verify", str(path))
    assert verified.returncode == 0, verified.stdout
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    with Cache(path, mode="replay") as cache:
        assert len(cache) == kept
        # Each entry kept is one written, read back with its checksum (format 4's).
        by_key = {e.key: e for e in entries}
        assert all(by_key[e.key] == e for e in cache.entries())


def test_verify_of_an_old_cache_neither_upgrades_nor_rewrites_it(tmp_path):
    path = tmp_path / "c.sqlite"
    format_3_file(path, [chat_entry(i) for i in range(20)])
    before = path.read_bytes()
    done = judge_cli("cache", "verify", str(path))
    assert done.returncode == 0, done.stderr
    assert "20 entries" in done.stdout and "format 3" in done.stdout
    assert "checksums" in done.stdout and "format 4" in done.stdout
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite"]


def test_verify_of_a_damaged_old_cache_reports_sqlite_s_check(tmp_path):
    path = tmp_path / "c.sqlite"
    damaged_format_3_file(path)
    before = path.read_bytes()
    done = judge_cli("cache", "verify", str(path))
    assert done.returncode == 2, done.stderr
    assert "SQLite integrity check" in done.stdout and f"judge cache repair {path}" in done.stdout
    assert path.read_bytes() == before


def test_verify_of_a_read_only_old_cache(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                      capture_output=True).returncode:  # fmt: skip
        pytest.skip("cannot mount a tmpfs here")
    try:
        format_3_file(folder / "c.sqlite", [chat_entry(i) for i in range(20)])
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        done = judge_cli("cache", "verify", str(folder / "c.sqlite"))
        assert done.returncode == 0, done.stderr
        assert "20 entries" in done.stdout and "format 3" in done.stdout
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_repair_of_a_damaged_format_2_cache_steps_over_its_damaged_key_ranges(tmp_path):
    path = tmp_path / "c.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for migration in judge.cache.migrations.MIGRATIONS[:2]:  # keyed by key only, no rowids
        migration(db)
    db.execute("PRAGMA user_version=2")
    db.execute(f"PRAGMA application_id={0x4A444745}")
    entries = [chat_entry(i) for i in range(2000)]
    db.executemany(
        "INSERT INTO judgments (key, kind, request, response, model, created)"
        " VALUES (?, ?, ?, ?, ?, 0)",
        [(e.key, e.kind, json.dumps(e.request), json.dumps(e.response), e.model) for e in entries],
    )
    db.close()
    leaves = leaf_pages(path, "sqlite_autoindex_judgments_1")
    hit = leaves[len(leaves) // 2 :][:2]
    overwrite(path, [page for page, _ in hit], 0, b"\xff" * 16)
    lost = sum(cells for _, cells in hit)
    repaired = judge_cli("cache", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    assert judge_cli("cache", "verify", str(path)).returncode == 0
    by_key = {e.key: e for e in entries}
    with Cache(path, mode="replay") as cache:
        kept = list(cache.entries())
    # The rows of the damaged pages are lost, and at most a few beside them (the keys
    # between two damaged pages, which no range of keys reaches).
    assert 2000 - lost - 8 <= len(kept) <= 2000 - lost
    assert all(by_key[e.key] == e for e in kept)
