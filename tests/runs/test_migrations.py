"""The run store's format history: a format-1 file upgraded in place, a file from a newer
judge refused untouched, a new file at the latest format."""

from __future__ import annotations

import sqlite3

import pytest

from judge.runs.migrations import MIGRATIONS, SCHEMA_VERSION
from judge.runs.store import RunStore, RunStoreError

APPLICATION_ID = 0x4A52554E  # "JRUN", frozen: the stores written already carry it

# Format 1 as the first release wrote it, frozen here: the test of the upgrade must not
# follow later edits of m001 (a released migration is never edited).
FORMAT_1 = """
CREATE TABLE runs (id TEXT NOT NULL UNIQUE, name TEXT, created TEXT NOT NULL,
 command TEXT NOT NULL, out_dir TEXT NOT NULL, data TEXT NOT NULL, data_sha256 TEXT NOT NULL,
 model TEXT, embeddings TEXT, prompts TEXT NOT NULL, metrics TEXT NOT NULL,
 summary TEXT NOT NULL, rows INTEGER NOT NULL, git TEXT, app TEXT);
CREATE INDEX runs_by_name ON runs (name);
INSERT INTO runs VALUES ('0123456789ab', 'old', '2025-05-01T10:00:00Z', 'eval', '/runs/old',
 'data.jsonl', 'cafe', 'openai/m', NULL, '{"faithfulness": "v1"}', '["faithfulness"]',
 '{"faithfulness": {"ci_high": 0.9, "ci_low": 0.4, "mean": 0.7, "scored": 3}}', 3,
 '{"commit": "abc", "dirty": false, "root": "/src"}', NULL);
INSERT INTO runs VALUES ('ba9876543210', NULL, '2025-05-02T10:00:00Z', 'merge', '/runs/two',
 'data.jsonl', 'cafe', NULL, NULL, '{}', '["ndcg@10"]', '{}', 5, NULL, NULL);
"""


def format_1_file(path):
    db = sqlite3.connect(path)
    db.executescript(FORMAT_1)
    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    return path


def version(path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def test_the_format_history_has_three_formats():
    assert SCHEMA_VERSION == len(MIGRATIONS) == 3


def test_a_format_1_store_is_upgraded_and_keeps_its_runs(tmp_path):
    path = format_1_file(tmp_path / "runs.sqlite")
    with RunStore(path) as store:
        old, merged = store.runs()
        assert version(path) == 3
        assert (old.id, old.name, old.command, old.rows) == ("0123456789ab", "old", "eval", 3)
        assert old.summary["faithfulness"]["mean"] == 0.7 and old.prompts == {"faithfulness": "v1"}
        assert old.git == {"commit": "abc", "dirty": False, "root": "/src"}
        assert (old.tags, old.baseline, merged.tags, merged.baseline) == ([], False, [], False)
        # what format 2 added works on the upgraded runs
        assert store.tag("old", ["legacy"]).tags == ["legacy"]
        assert store.set_baseline("ba98").id == merged.id
    with RunStore(path) as store:  # opened again: nothing left to migrate
        assert store.get("baseline").id == "ba9876543210"
        assert store.get("0123").tags == ["legacy"]
        # format 3: a run recorded before it has no results hash (unverifiable, not refused)
        assert old.results_sha256 is None and merged.results_sha256 is None
    assert version(path) == 3


def test_an_upgraded_store_holds_one_baseline_at_most(tmp_path):
    path = format_1_file(tmp_path / "runs.sqlite")
    RunStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET baseline = 1 WHERE id = '0123456789ab'")
    with pytest.raises(sqlite3.IntegrityError):  # format 2's partial unique index
        db.execute("UPDATE runs SET baseline = 1 WHERE id = 'ba9876543210'")
    db.close()


def test_a_store_from_a_newer_judge_is_refused_untouched(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    before = path.read_bytes()
    with pytest.raises(RunStoreError, match=r"newer judge \(run store format 4; .* up to 3\)"):
        RunStore(path)
    assert path.read_bytes() == before and version(path) == SCHEMA_VERSION + 1


def test_a_new_store_is_at_the_latest_format_and_marked(tmp_path):
    path = tmp_path / "runs.sqlite"
    RunStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    assert version(path) == SCHEMA_VERSION
