"""Cache(path, fallbacks=[...]): lookups try the own file, then each fallback in order;
writes, len(), entries() and exports touch only the own file; fallbacks are never written."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from judge.cache.identity import UNKNOWN
from judge.cache.store import Cache
from judge.errors import CacheError
from judge.llm.session import LLMSession
from judge.testing import FakeLLMServer
from tests.helpers.cache import ask, entry, llm, says, v1_copy


def filled(path: Path, *entries: object) -> Path:
    with Cache(path) as cache:
        cache.put_many(list(entries))  # type: ignore[arg-type]
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_lookups_try_the_own_file_then_each_fallback_in_order(tmp_path):
    first = filled(tmp_path / "a.sqlite", entry(1, "a"), entry(2, "a"))
    second = filled(tmp_path / "b.sqlite", entry(2, "b"), entry(3, "b"))
    own = filled(tmp_path / "own.sqlite", entry(1, "own"))
    with Cache(own, fallbacks=[first, second]) as cache:
        assert cache.fallbacks == (first, second)
        assert cache.get(entry(1).key) == entry(1, "own")  # the own file wins
        assert cache.get_response(entry(2).key) == entry(2, "a").response  # then the first
        assert cache.get(entry(3).key) == entry(3, "b")
        assert cache.get(entry(4).key) is None and cache.get_response(entry(4).key) is None
        assert (cache.hits, cache.misses) == (3, 2)  # a fallback hit is one hit, no miss


def test_writes_counts_and_exports_stay_in_the_own_file(tmp_path):
    fallback = filled(tmp_path / "f.sqlite", entry(1), entry(2))
    before = digest(fallback)
    with Cache(tmp_path / "own.sqlite", fallbacks=[fallback]) as cache:
        assert cache.get(entry(1).key) is not None
        cache.put(entry(1, "new"))  # a key the fallback holds: stored in the own file
        cache.put_many([entry(3)])
        assert len(cache) == 2
        assert [e.key for e in cache.entries()] == sorted([entry(1).key, entry(3).key])
        assert cache.export_jsonl(tmp_path / "out.jsonl") == 2
        assert cache.get_response(entry(1).key) == entry(1, "new").response
    assert digest(fallback) == before  # not a byte changed
    with Cache(fallback) as plain:
        assert plain.get(entry(1).key) == entry(1) and len(plain) == 2


@pytest.mark.parametrize(("mode", "reads"), [("replay", True), ("record", False), ("off", False)])
def test_fallbacks_are_read_only_in_modes_that_read(tmp_path, mode, reads):
    fallback = filled(tmp_path / "f.sqlite", entry(1))
    with Cache(tmp_path / "own.sqlite", mode, fallbacks=[fallback]) as cache:
        assert (cache.get(entry(1).key) is not None) is reads
        assert (cache.get_response(entry(1).key) is not None) is reads


def test_a_fallback_that_is_missing_or_not_a_cache_is_refused(tmp_path):
    with pytest.raises(CacheError, match=r"fallback cache .*absent\.sqlite: no such file"):
        Cache(tmp_path / "own.sqlite", fallbacks=[tmp_path / "absent.sqlite"])
    assert not (tmp_path / "absent.sqlite").exists()
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(CacheError, match="not a judge cache"):
        Cache(tmp_path / "own.sqlite", fallbacks=[other])


def test_a_session_replays_from_a_fallback_without_a_request(tmp_path):
    recorded = tmp_path / "recorded.sqlite"
    with FakeLLMServer(says("no")) as server:
        with Cache(recorded) as cache:
            assert ask(LLMSession(llm(server), cache=cache), "Is water dry?") == "no"
        made = server.count()
        with Cache(tmp_path / "own.sqlite", "replay", fallbacks=[recorded]) as cache:
            assert ask(LLMSession(llm(server), cache=cache), "Is water dry?") == "no"
            assert len(cache) == 0 and cache.hits == 1
        assert server.count() == made == 1


def test_an_old_format_fallback_is_migrated_then_read(tmp_path):
    old = v1_copy(tmp_path)  # fixtures/cache-v1: format 1, judgments under no server
    with FakeLLMServer(says("never asked")) as server:
        with Cache(tmp_path / "own.sqlite", "replay", fallbacks=[old]) as cache:
            session = LLMSession(llm(server, cache_as=UNKNOWN), cache=cache)
            assert ask(session, "Is the sky blue?") == "yes"
        assert server.count() == 0
