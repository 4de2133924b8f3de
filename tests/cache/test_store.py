"""The judgment cache on its own: modes, JSONL export/import, damage, several processes."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3

import pytest

from judge.cache.store import Cache, cache_key
from judge.errors import CacheError
from tests.helpers.cache import entry


def test_key_is_canonical_json_hash():
    assert cache_key({"b": 1, "a": [1, "é"]}) == cache_key({"a": [1, "é"], "b": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 1.5})


def test_values_are_readable_json_not_pickle(tmp_path):
    with Cache(tmp_path / "c.sqlite") as cache:
        cache.put(entry(1))
    db = sqlite3.connect(tmp_path / "c.sqlite")
    request, response = db.execute("SELECT request, response FROM judgments").fetchone()
    assert response == '{"choices":[{"n":1,"verdict":"yes"}]}'
    assert request.startswith('{"kind":"chat"')


@pytest.mark.parametrize(
    ("mode", "reads", "stores"),
    [
        ("read-write", True, True),
        ("replay", True, False),
        ("record", False, True),
        ("off", False, False),
    ],
)
def test_modes(tmp_path, mode, reads, stores):
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        cache.put(entry(1, "old"))
    with Cache(path, mode=mode) as cache:
        got = cache.get(entry(1).key)
        assert (got is not None) == reads
        cache.put(entry(1, "new"))
    with Cache(path) as cache:
        stored = cache.get(entry(1).key)
        assert stored.response["choices"][0]["verdict"] == ("new" if stores else "old")
    with pytest.raises(CacheError, match="not one of"):
        Cache(path, mode="sometimes")


def test_export_import_round_trip_sorted_and_checked(tmp_path):
    with Cache(tmp_path / "a.sqlite") as cache:
        for i in (3, 1, 2):
            cache.put(entry(i))
        assert cache.export_jsonl(tmp_path / "out.jsonl") == 3
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [line.split('"key":"')[1][:64] for line in lines] == sorted(
        entry(i).key for i in (1, 2, 3)
    )
    with Cache(tmp_path / "b.sqlite") as other:
        assert other.import_jsonl(tmp_path / "out.jsonl") == 3
        assert list(other.entries()) == sorted((entry(i) for i in (1, 2, 3)), key=lambda e: e.key)
        other.export_jsonl(tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_text() == (tmp_path / "out.jsonl").read_text()
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text(lines[0].replace('"q', '"Q', 1) + "\n")
    with Cache(tmp_path / "c.sqlite") as cache, pytest.raises(CacheError, match=":1: the key"):
        cache.import_jsonl(tampered)
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    with Cache(tmp_path / "c.sqlite") as cache, pytest.raises(CacheError, match=":1: not a"):
        cache.import_jsonl(tmp_path / "junk.jsonl")


def test_damaged_and_foreign_files_are_clear_errors(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(CacheError, match="damaged or not an SQLite file"):
        Cache(junk)
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(CacheError, match="not a judge cache"):
        Cache(foreign)


def _writer(path: str, start: int, count: int) -> None:
    with Cache(path) as cache:
        for i in range(start, start + count):
            cache.put(entry(i))


def test_two_processes_writing_one_cache_lose_nothing(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    Cache(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, n * 300, 300)) for n in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    with Cache(path) as cache:
        assert len(cache) == 600
        assert {e.response["choices"][0]["n"] for e in cache.entries()} == set(range(600))


def test_reproducible_export_zeroes_the_recording_time(tmp_path):
    with Cache(tmp_path / "a.sqlite") as cache:
        cache.put(entry(1))  # created=1.5
        cache.export_jsonl(tmp_path / "plain.jsonl")
        cache.export_jsonl(tmp_path / "fixed.jsonl", reproducible=True)
    assert '"created":1.5' in (tmp_path / "plain.jsonl").read_text()
    assert '"created":0.0' in (tmp_path / "fixed.jsonl").read_text()
    with Cache(tmp_path / "b.sqlite") as again:  # export -> import -> export is stable
        again.import_jsonl(tmp_path / "fixed.jsonl")
        again.export_jsonl(tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "fixed.jsonl").read_bytes()


def test_cache_mode_is_checked_on_every_assignment(tmp_path):
    with Cache(tmp_path / "c.sqlite") as cache:
        with pytest.raises(CacheError, match=r"'bogus' is not one of .*set mode 'off'"):
            cache.mode = "bogus"  # type: ignore[assignment]
        assert cache.mode == "read-write" and cache.reads and cache.stores
        cache.mode = "replay"
        assert cache.reads and not cache.stores
        cache.mode = "off"
        assert not cache.reads and not cache.stores


def test_a_cache_whose_folder_cannot_be_made_says_it_is_the_cache(tmp_path):
    """A cache under a file (or /proc) failed with a bare OSError: the CLI said only
    "judge: error: .../x: Not a directory", naming neither the cache nor the fix."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CacheError, match=r"the cache's folder .* cannot be made .*--no-cache"):
        Cache(blocker / "sub" / "cache.sqlite")


def test_cache_export_reproducible_writes_the_same_bytes_from_two_recordings(tmp_path):
    """`judge cache export --reproducible` is `export_jsonl(reproducible=True)`: the same
    judgments recorded at two times export to the same bytes (for fixtures kept in git)."""
    from tests.helpers.cli import run

    for name, created in (("a", 1.5), ("b", 99.25)):
        with Cache(tmp_path / f"{name}.sqlite") as cache:
            cache.put(dataclasses.replace(entry(1), created=created))
        done = run("cache", "export", tmp_path / f"{name}.sqlite", tmp_path / f"{name}.jsonl",
                   "--reproducible")  # fmt: skip
        assert done.returncode == 0, done.stderr
        plain = run("cache", "export", tmp_path / f"{name}.sqlite", tmp_path / f"{name}-t.jsonl")
        assert plain.returncode == 0, plain.stderr
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert '"created":0.0' in (tmp_path / "a.jsonl").read_text()
    assert '"created":99.25' in (tmp_path / "b-t.jsonl").read_text()  # without: the time
    with Cache(tmp_path / "a.sqlite") as cache:
        cache.export_jsonl(tmp_path / "python.jsonl", reproducible=True)
    assert (tmp_path / "python.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    refused = run("cache", "import", tmp_path / "a.sqlite", tmp_path / "a.jsonl", "--reproducible")
    assert refused.returncode == 2 and "--reproducible" in refused.stderr
