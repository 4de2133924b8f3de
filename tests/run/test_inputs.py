"""Inputs read as the run consumes them (`judge.run.inputs`): the same rows, numbers,
columns, source and data hash as loading them whole, a shard's rows alone parsed, and a
changed input refused."""

from __future__ import annotations

import json

import pytest

import judge.run.inputs as inputs
from judge.errors import InputFormatError
from judge.json_values import sha256_hex
from judge.run.data import load_rows
from judge.run.inputs import open_input, reopen_input
from judge.run.plan import row_hash
from judge.run.shard import Shard

RECORDS = [
    {
        "id": f"q{i}",
        "question": f"What is {i}?",
        "answer": f"It is {i}.",
        "contexts": [f"{i} is a number.", "Bananas are yellow."],
        "ground_truth": None if i % 3 == 0 else f"{i}",
        "retrieved_ids": [f"d{i}", f"d{i + 1}"],
        "relevance": {f"d{i}": 1 + i % 2},
        "note": "x" * (i % 4),
    }
    for i in range(23)
]
BROKEN = {"question": 7, "answer": "a question that is no text"}


def _jsonl(path, records, *, newline="\n", blank=False):
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    if blank:  # blank lines, one of Unicode spaces only, are no rows
        lines[3:3] = ["", "   ", "\u3000\u2003", "\x1c"]
    path.write_bytes((newline.join(lines) + newline).encode("utf-8"))
    return path


def _csv(path, records):
    import pandas

    frame = pandas.DataFrame(records)
    for column in ("contexts", "retrieved_ids", "relevance"):
        frame[column] = [json.dumps(v) for v in frame[column]]
    frame.to_csv(path, index=False)
    return path


def _parquet(path, records):
    import pandas

    frame = pandas.DataFrame(records)
    frame.index = [f"i{n}" for n in range(len(frame))]  # a pandas index column is kept too
    frame.to_parquet(path, row_group_size=5)
    return path


def _same(data, column_map=None):
    """open_input gives load_rows's rows, columns and source, and each shard its part."""
    loaded, columns, source = load_rows(data, column_map)
    rows = open_input(data, column_map)
    assert (rows.columns, rows.source, len(rows)) == (columns, source, len(loaded))
    assert list(rows) == loaded
    assert list(rows) == loaded  # read again from the start
    for count in (2, 3):
        for index in range(1, count + 1):
            shard = Shard(index, count)
            assert list(rows.only(shard)) == [r for r in loaded if shard.holds(r.number)]
    # plan_run's data hash of loaded rows
    assert rows.data_sha256() == sha256_hex("".join(row_hash(r) for r in loaded))
    return loaded


@pytest.mark.parametrize(
    "make",
    [
        lambda p: _jsonl(p / "d.jsonl", [*RECORDS, BROKEN]),
        lambda p: _jsonl(p / "d.jsonl", RECORDS, newline="\r\n", blank=True),
        lambda p: _jsonl(p / "d.jsonl", RECORDS, newline="\r"),  # an old Mac file
        lambda p: _csv(p / "d.csv", RECORDS),
        lambda p: _parquet(p / "d.parquet", RECORDS),
        lambda p: p.joinpath("d.json").write_text(json.dumps(RECORDS)) and p / "d.json",
    ],
    ids=["jsonl", "jsonl-crlf-blank", "jsonl-cr", "csv", "parquet", "json"],
)
def test_files_give_the_rows_loading_them_gives(tmp_path, make):
    loaded = _same(make(tmp_path))
    assert len(loaded) >= len(RECORDS)


def test_in_memory_inputs_and_datasets_give_the_rows_loading_them_gives(tmp_path):
    import datasets
    import pandas

    assert _same([*RECORDS, BROKEN])[-1].error is not None
    _same(pandas.DataFrame(RECORDS))
    dataset = datasets.Dataset.from_list(RECORDS)
    _same(dataset)
    dataset.save_to_disk(str(tmp_path / "saved"))
    _same(str(tmp_path / "saved"))
    dataset.to_parquet(str(tmp_path / "features.parquet"))  # datasets' own features
    _same(tmp_path / "features.parquet")
    _same([{"q": "one?"}, {"q": "two?", "extra": 1}], column_map={"question": "q"})


def test_a_whole_input_problem_is_refused_before_any_row_as_load_rows_refuses_it(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(RECORDS[0]) + "\n[1, 2]\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    for data in (bad, empty, tmp_path / "missing.jsonl", [1], {"a": 1}):
        with pytest.raises(InputFormatError) as loading:
            load_rows(data)
        with pytest.raises(InputFormatError) as opening:
            open_input(data)
        assert str(opening.value) == str(loading.value)


def test_a_shard_parses_only_its_own_lines(tmp_path, monkeypatch):
    path = _jsonl(tmp_path / "d.jsonl", RECORDS[:6], blank=True)
    rows = open_input(path)
    # Every record a read parses goes through json_record: the lines it was called on are
    # the lines parsed (a shard that parsed the other shard's lines would list them too).
    parsed = []
    parse = inputs.json_record

    def counted(text, where, line):
        parsed.append(line)
        return parse(text, where, line)

    monkeypatch.setattr(inputs, "json_record", counted)
    mine = reopen_input(path, rows.columns, len(rows), rows.records.identity())
    assert [r.sample.id for r in mine.only(Shard(1, 2)) if r.sample] == ["q0", "q2", "q4"]
    assert parsed == [1, 3, 9]  # rows 0, 2 and 4; lines 4-7 are blank, row 3 is line 8
    parsed.clear()
    assert [r.sample.id for r in mine.only(Shard(2, 2)) if r.sample] == ["q1", "q3", "q5"]
    assert parsed == [2, 8, 10]


def test_a_changed_input_is_refused(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", RECORDS[:4])
    rows = open_input(path)
    identity = rows.records.identity()
    _jsonl(path, RECORDS[:5])
    with pytest.raises(InputFormatError, match="changed while the run was starting"):
        reopen_input(path, rows.columns, len(rows), identity)
    with pytest.raises(InputFormatError, match="changed since it was read"):
        list(rows)
