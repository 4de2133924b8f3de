"""The run store: records kept and read back, references, tags, the baseline, forgetting,
files that are not run stores, and two processes adding runs at once."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from judge.errors import JudgeError
from judge.runs.store import (
    DEFAULT_RUNS,
    RunNotFound,
    RunStore,
    RunStoreError,
    default_runs_path,
    new_run_id,
)
from tests.helpers.runs import record

ROOT = Path(__file__).resolve().parents[2]


def test_a_record_is_kept_field_for_field_and_read_back_after_reopening(tmp_path):
    path = tmp_path / "deep" / "folder" / "runs.sqlite"  # folders made as needed
    full = record(
        name="rerank",
        embeddings="openai/text-embedding-3-small",
        git={"commit": "c" * 40, "dirty": True, "root": "/src/app"},
        app={"target": "app.py:answer", "fingerprint": "f" * 64},
        summary={"faithfulness": {"mean": None, "ci_low": None, "ci_high": None, "scored": 0}},
        tags=["b", "a", "b"],
        results_sha256="e" * 64,
    )
    with RunStore(path) as store:
        added = store.add(full)
    assert added.tags == ["a", "b"]
    with RunStore(path) as store:
        (back,) = store.runs()
    assert back == added
    assert back.to_dict() == {**full.to_dict(), "tags": ["a", "b"]}
    assert set(back.to_dict()) == set(full.__dataclass_fields__)


def test_runs_come_oldest_first(tmp_path):
    with RunStore(tmp_path / "r.sqlite") as store:
        late = store.add(record(created="2026-01-02T00:00:00Z"))
        early = store.add(record(created="2026-01-01T00:00:00Z"))
        same_second = store.add(record(created="2026-01-02T00:00:00Z"))
        assert [r.id for r in store.runs()] == [early.id, late.id, same_second.id]


def test_a_run_is_found_by_id_prefix_name_or_baseline(tmp_path):
    with RunStore(tmp_path / "r.sqlite") as store:
        first = store.add(record(id="aaaa11112222", name="dense"))
        second = store.add(record(id="aaaa33334444", name="dense"))
        other = store.add(record(id="bbbb55556666", name="rerank"))
        assert store.get("aaaa11112222") == first
        assert store.get("aaaa3") == second
        assert store.get("bbbb") == other
        assert store.get("dense") == second  # the latest of that name
        with pytest.raises(RunNotFound, match=r"start of 2 run ids.*give more of the id"):
            store.get("aaaa")
        with pytest.raises(RunNotFound, match=r"4 characters or more.*judge runs list"):
            store.get("bbb")
        with pytest.raises(RunNotFound, match=r"no run 'cccc'.*judge runs list"):
            store.get("cccc")
        with pytest.raises(RunNotFound, match=r"no baseline is pinned.*judge runs baseline REF"):
            store.get("baseline")
        store.set_baseline("rerank")
        assert store.get("baseline").id == other.id


def test_tags_are_added_once_and_removed(tmp_path):
    with RunStore(tmp_path / "r.sqlite") as store:
        run = store.add(record())
        assert store.tag(run.id, ["prod", "v2", "prod"]).tags == ["prod", "v2"]
        assert store.tag(run.id, ["nightly"]).tags == ["nightly", "prod", "v2"]
        assert store.tag(run.id, ["prod", "absent"], remove=True).tags == ["nightly", "v2"]
        with pytest.raises(JudgeError, match="cannot be empty"):
            store.tag(run.id, [" "])
        assert store.get(run.id).tags == ["nightly", "v2"]


def test_one_baseline_at_most(tmp_path):
    with RunStore(tmp_path / "r.sqlite") as store:
        a, b = store.add(record()), store.add(record())
        assert store.baseline() is None
        assert store.set_baseline(a.id).id == a.id
        assert store.set_baseline(b.id[:6]).id == b.id
        assert [r.baseline for r in store.runs()] == [False, True]
        c = store.add(record(baseline=True))  # a record added as the baseline takes the flag
        assert [r.id for r in store.runs() if r.baseline] == [c.id]
        assert store.set_baseline(None) is None
        assert not any(r.baseline for r in store.runs())


def test_forgetting_a_run_leaves_its_folder_and_the_cache(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    cache = tmp_path / "cache.sqlite"
    cache.write_bytes(b"cache")
    with RunStore(tmp_path / "r.sqlite") as store:
        keep, gone = store.add(record()), store.add(record(out_dir=str(out), tags=["x"]))
        assert store.remove(gone.id[:5]) == gone
        assert store.runs() == [keep]
        with pytest.raises(RunNotFound):
            store.get(gone.id)
        again = store.add(record(id=gone.id))  # the id is free again, with no old tags
        assert again.tags == [] and store.get(gone.id).tags == []
    assert (out / "summary.json").read_text() == "{}" and cache.read_bytes() == b"cache"


def test_an_id_twice_is_refused(tmp_path):
    with RunStore(tmp_path / "r.sqlite") as store:
        run = store.add(record())
        with pytest.raises(RunStoreError, match="already"):
            store.add(record(id=run.id))
        assert len(store.runs()) == 1


def test_files_that_are_not_run_stores_are_refused_unchanged(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    before = other.read_bytes()
    with pytest.raises(RunStoreError, match=r"not a judge run store.*--runs"):
        RunStore(other)
    assert other.read_bytes() == before
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is no database at all" * 100)
    with pytest.raises(RunStoreError, match=r"cannot be used.*move it away"):
        RunStore(garbage)


def test_new_ids_are_12_lowercase_hex_characters():
    ids = {new_run_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 12 and i == i.lower() and int(i, 16) >= 0 for i in ids)


def test_the_default_path_is_judge_runs_or_the_environment(monkeypatch):
    monkeypatch.delenv("JUDGE_RUNS")
    assert default_runs_path() == Path(DEFAULT_RUNS) == Path(".judge/runs.sqlite")
    monkeypatch.setenv("JUDGE_RUNS", "/somewhere/runs.sqlite")
    assert default_runs_path() == Path("/somewhere/runs.sqlite")


ADDER = """
import sys
import threading
from judge.runs.store import RunStore
from tests.helpers.runs import record
with RunStore(sys.argv[1]) as store:
    for i in range(20):
        store.add(record(name=f"{sys.argv[2]}-{i}"))
"""


def test_two_processes_adding_runs_at_once_lose_none(tmp_path):
    path = tmp_path / "runs.sqlite"  # absent: both processes may create it
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", ADDER, str(path), who], cwd=ROOT, stderr=subprocess.PIPE
        )
        for who in ("a", "b")
    ]
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err.decode()
    with RunStore(path) as store:
        names = [r.name for r in store.runs()]
    assert sorted(names) == sorted(f"{w}-{i}" for w in "ab" for i in range(20))


def test_two_threads_sharing_one_store_lose_none(tmp_path):
    with RunStore(tmp_path / "runs.sqlite") as store:

        def add(who: str) -> None:
            for i in range(20):
                store.add(record(name=f"{who}-{i}"))

        threads = [threading.Thread(target=add, args=(who,)) for who in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len({r.id for r in store.runs()}) == 40


def test_a_run_named_baseline_is_found_by_its_name_until_one_is_pinned(tmp_path):
    # `judge experiment --name baseline`, then `judge runs baseline baseline` to pin it:
    # "baseline" names the pinned run when there is one, else the run of that name.
    with RunStore(tmp_path / "r.sqlite") as store:
        named = store.add(record(id="aaaa11112222", name="baseline"))
        other = store.add(record(id="bbbb55556666", name="rerank"))
        assert store.get("baseline") == named
        assert store.set_baseline("baseline").id == named.id
        store.set_baseline(other.id)
        assert store.get("baseline").id == other.id  # the pinned one, once there is one
