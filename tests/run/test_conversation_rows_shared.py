"""The rows of conversations share their histories (built once per conversation): their
samples and hashes are the same however they are read (the streamed reader, load_rows,
shards, another process, a history read back from JSON or a pickle), and a turn whose
history holds a lone surrogate says so in the same words."""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from judge.conversations import conversation_rows, flat_turn_records, turn_records
from judge.run.data import build_rows, load_rows, resolve_columns
from judge.run.digest import row_hash
from judge.run.inputs import open_input
from judge.run.shard import Shard
from tests.helpers.random_chats import random_chats


def write_chats(path: Path, chats: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in chats), encoding="utf-8")
    return path


def plain(record: dict[str, Any]) -> dict[str, Any]:
    """A turn record as JSON gives it back: its history a list of dicts like any other."""
    return json.loads(json.dumps(record))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_conversations_rows_hash_alike_however_they_are_read(tmp_path, seed):
    path = write_chats(tmp_path / "c.jsonl", random_chats(seed))
    streamed = open_input(path)
    hashes = [row_hash(row) for row in streamed]
    loaded, columns, _ = load_rows(path)
    assert [row_hash(row) for row in loaded] == hashes
    # rows alike hash alike, no others
    assert len(set(hashes)) == len({repr((r.sample, r.error)) for r in loaded})
    sharded: dict[int, str] = {}
    for index in (1, 2, 3):
        sharded.update((r.number, row_hash(r)) for r in streamed.only(Shard(index, 3)))
    assert [sharded[n] for n in range(len(hashes))] == hashes
    records = [r for _, r in conversation_rows(enumerate(random_chats(seed)))]
    for copy in (plain, lambda r: pickle.loads(pickle.dumps(r))):
        again = build_rows([copy(r) for r in records], columns)
        assert [row_hash(row) for row in again] == hashes
        assert [row.sample for row in again] == [row.sample for row in loaded]
    other = subprocess.run(
        [sys.executable, "-c", HASHES, str(path)], capture_output=True, text=True, check=True
    )
    assert json.loads(other.stdout) == hashes
    assert streamed.data_sha256() == open_input(path).data_sha256()


HASHES = """
import json, sys
from judge.run.digest import row_hash
from judge.run.inputs import open_input
print(json.dumps([row_hash(row) for row in open_input(sys.argv[1])]))
"""


def test_a_turns_hash_is_its_contents_not_where_its_history_came_from():
    """A sample made by hand with the same messages hashes as the reader's; another
    message, role, turn or context in its history changes the hash."""
    chat = {
        "id": "c",
        "turns": [
            {"role": "user", "content": "I live in Lyon."},
            {"role": "assistant", "content": "Noted.", "contexts": ["Lyon."]},
            {"role": "user", "content": "Where?"},
            {"role": "assistant", "content": "Lyon."},
        ],
    }
    records = turn_records(chat, 0)
    columns = resolve_columns(dict.fromkeys(k for r in records for k in r), None)
    row = build_rows(records, columns)[1]
    assert row.sample is not None
    by_hand = dataclasses.replace(row.sample, history=tuple(row.sample.history))
    assert row_hash(type(row)(row.number, by_hand)) == row_hash(row)
    first = row.sample.history[1]
    for change in (
        {"content": "Noted!"},
        {"role": "user"},
        {"turn": 3},
        {"contexts": ("Lyon!",)},
        {"contexts": ()},
    ):
        changed = type(first)(**{**first.__dict__, **change})
        history = (row.sample.history[0], changed, row.sample.history[2])
        other = dataclasses.replace(row.sample, history=history)
        assert row_hash(type(row)(row.number, other)) != row_hash(row), change


def test_an_ordinary_rows_hash_is_what_it_was():
    """Rows that are no conversation's turn keep their hashes (a checkpoint of an earlier
    run resumes): with and without extra columns, as computed before histories were
    shared."""
    rows = build_rows(
        [
            {"question": "q", "answer": "a", "contexts": ["c"]},
            {"question": "q", "answer": "a", "contexts": ["c"], "tag": {"x": [1, 2]}},
        ],
        {"question": "question", "answer": "answer", "contexts": "contexts"},
    )
    assert [row_hash(r) for r in rows] == [
        "ca3fdf5fd95da9edda7545a5583cfa8f0e9b131787d3b36e40b9e1d4ef91e606",
        "2d02a7e5cc5d8de63e72e184d204050575bfd950ea3a31c8194afc8b4691e19b",
    ]


def test_a_lone_surrogate_in_a_history_is_named_as_a_plain_history_names_it():
    """The reader finds a history's lone surrogate once per conversation: the error of each
    turn is the one the same history read from JSON gets (the last broken message's)."""
    chat = {
        "id": "c",
        "turns": [
            {"role": "user", "content": "a\ud800"},
            {"role": "assistant", "content": "A."},
            {"role": "user", "content": "bb\udfff"},
            {"role": "assistant", "content": "B.", "contexts": ["x\ud801"]},
            {"role": "user", "content": "c"},
            {"role": "assistant", "content": "C."},
        ],
    }
    records = turn_records(chat, 0)
    columns = resolve_columns(dict.fromkeys(k for r in records for k in r), None)
    shared = [row.error for row in build_rows(records, columns)]
    copied = [
        row.error
        for row in build_rows([{**r, "history": list(r["history"])} for r in records], columns)
    ]
    assert shared == copied
    assert all(error and "lone surrogate" in error for error in shared)
    assert "'\\ud801' at character 1" in str(shared[2])


def test_a_flat_tables_rows_are_those_of_its_histories_read_from_json():
    """The rows of a flat table of turns (shuffled, a turn without question, one given
    twice, a lone surrogate) share their conversation's messages: their samples, errors
    and hashes are those of the same histories given as plain lists."""
    rng = random.Random(5)
    records: list[dict[str, Any]] = []
    for c in range(20):
        turns = list(range(1, rng.randint(2, 9)))
        rng.shuffle(turns)
        for t in turns:
            record: dict[str, Any] = {"conversation_id": f"c{c}", "turn": t}
            if rng.random() < 0.9:
                record["question"] = f"Q {c} {t}?" if rng.random() < 0.95 else "bad \ud800"
            if rng.random() < 0.9:
                record["answer"] = f"A {c} {t}."
            if rng.random() < 0.5:
                record["contexts"] = [f"ctx {t}"] if rng.random() < 0.8 else ["  "]
            records.append(record)
            if rng.random() < 0.05:
                records.append(dict(record))
    turns = flat_turn_records(records)
    columns = resolve_columns(dict.fromkeys(k for r in turns for k in r), None)
    shared = build_rows(turns, columns)
    copied = build_rows(
        [{**r, "history": list(r["history"])} if "history" in r else r for r in turns], columns
    )
    assert [(r.sample, r.error) for r in shared] == [(r.sample, r.error) for r in copied]
    assert [row_hash(r) for r in shared] == [row_hash(r) for r in copied]
    assert sum(1 for r in shared if r.sample is not None and r.sample.history) > 50
    assert {"lone surrogate", "in order", "a turn is one row"} <= {
        next((w for w in ("lone surrogate", "in order", "a turn is one row") if w in e), e)
        for e in (r.error for r in shared)
        if e
    }
