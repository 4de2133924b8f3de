"""`judge runs` after real `judge eval` and `judge merge` runs against the fake server:
one record per finished run (however many processes judged it; none per shard), what
list, show, tag, rm and baseline print, and a store that cannot take a record."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from judge.cli.main import main
from judge.runs.store import RunStore
from judge.testing import heuristic_judge
from tests.helpers.cli import dataset, eval_args, run

RECORDED = re.compile(r"judge: recorded run ([0-9a-f]{12}) in (\S+)")


@pytest.fixture
def server(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    return fake_llm_server


def judge(capsys, *args: object) -> tuple[int, str, str]:
    """`judge ARGS` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def stored(path: Path) -> list:
    with RunStore(path) as store:
        return store.runs()


def test_a_run_is_recorded_then_listed_shown_tagged_pinned_and_forgotten(
    tmp_path, server, capsys, run_store
):
    data = dataset(tmp_path / "d.jsonl", 3)
    code, _, err = judge(capsys, *eval_args(data, server, tmp_path, "--name", "dense"))
    assert code == 0, err
    run_id, where = RECORDED.search(err).groups()
    assert where == str(run_store)
    (record,) = stored(run_store)
    assert (record.id, record.name, record.command, record.rows) == (run_id, "dense", "eval", 3)
    assert record.out_dir == str((tmp_path / "out").resolve())

    code, out, _ = judge(capsys, "runs", "list")
    header, line = out.splitlines()[:2]
    assert header.split()[:7] == ["id", "name", "created", "command", "model", "data", "rows"]
    assert "faithfulness" in header and "context_recall" in header
    assert line.split()[:2] == [run_id, "dense"] and "openai/judge" in line and " 3 " in line

    code, out, _ = judge(capsys, "runs", "list", "--json")
    assert json.loads(out) == [record.to_dict()]

    code, out, _ = judge(capsys, "runs", "show", run_id[:5])
    assert code == 0 and f"outputs     {record.out_dir}\n" in out
    # 3 rows all 1: the exact bound 0.025^(1/3); faithfulness's 3 scores all 0.5: none
    assert re.search(r"context_recall\s+1\.000\s+\[0\.292, 1\.000\]\s+3", out), out
    assert re.search(r"faithfulness\s+0\.500\s+-\s+3", out), out

    tagged = judge(capsys, "runs", "tag", "dense", "prod", "v1")[1]
    assert tagged == f"run {run_id}: tags prod, v1\n"
    untagged = judge(capsys, "runs", "tag", run_id, "v1", "--remove")[1]
    assert untagged == f"run {run_id}: tags prod\n"
    assert "prod" in judge(capsys, "runs", "list")[1].splitlines()[1]

    assert judge(capsys, "runs", "baseline")[1].startswith("no baseline is pinned")
    assert judge(capsys, "runs", "baseline", "dense")[1] == f"pinned run {run_id} as the baseline\n"
    listed = judge(capsys, "runs", "list")[1].splitlines()
    assert listed[1].startswith("*") and listed[-1] == "* the baseline"
    assert judge(capsys, "runs", "baseline")[1].startswith(f"id          {run_id}  (the baseline)")
    assert judge(capsys, "runs", "show", "baseline", "--json")[1].count('"baseline": true') == 1
    assert judge(capsys, "runs", "baseline", "--clear")[1] == f"unpinned the baseline {run_id}\n"

    code, out, _ = judge(capsys, "runs", "rm", run_id)
    assert out == f"forgot run {run_id}; its outputs stay in {record.out_dir}\n"
    assert (tmp_path / "out" / "summary.json").is_file()
    assert (tmp_path / "cache.sqlite").is_file()
    assert judge(capsys, "runs", "list")[1].startswith(f"no runs recorded in {run_store} yet")


def test_an_absent_store_is_an_empty_history_and_no_file_is_made(tmp_path, capsys, run_store):
    code, out, _ = judge(capsys, "runs", "list")
    assert code == 0
    assert "no runs recorded" in out and "judge eval" in out and "--no-record" in out
    assert judge(capsys, "runs", "list", "--json")[1] == "[]\n"
    code, _, err = judge(capsys, "runs", "show", "abcd")
    assert code == 2 and f"no run store at {run_store}" in err
    elsewhere = tmp_path / "elsewhere.sqlite"
    assert judge(capsys, "runs", "list", "--runs", elsewhere)[0] == 0
    assert not run_store.exists() and not elsewhere.exists()


def test_unknown_references_and_usage_errors_say_what_to_do(tmp_path, server, capsys):
    data = dataset(tmp_path / "d.jsonl", 2)
    assert judge(capsys, *eval_args(data, server, tmp_path))[0] == 0
    code, _, err = judge(capsys, "runs", "show", "nope")
    assert code == 2 and "no run 'nope'" in err and "judge runs list" in err
    code, _, err = judge(capsys, "runs", "baseline", "nope", "--clear")
    assert code == 2 and "not both" in err
    code, _, err = judge(capsys, "runs", "show", "baseline")
    assert code == 2 and "judge runs baseline REF" in err


def test_runs_and_no_record_choose_where_and_whether(tmp_path, server, capsys, run_store):
    data = dataset(tmp_path / "d.jsonl", 2)
    code, _, err = judge(capsys, *eval_args(data, server, tmp_path, "--no-record"))
    assert code == 0 and "recorded" not in err and not run_store.exists()
    mine = tmp_path / "team" / "runs.sqlite"
    code, _, err = judge(capsys, *eval_args(data, server, tmp_path, "--runs", mine))
    assert code == 0 and f" in {mine}" in err
    assert len(stored(mine)) == 1 and not run_store.exists()
    assert len(json.loads(judge(capsys, "runs", "list", "--json", "--runs", mine)[1])) == 1


def test_a_run_that_fails_its_gate_is_still_a_run(tmp_path, server, capsys, run_store):
    data = dataset(tmp_path / "d.jsonl", 2)
    code, _, err = judge(
        capsys, *eval_args(data, server, tmp_path, "--fail-under", "faithfulness=0.99")
    )
    assert code == 1 and "FAILED threshold" in err and RECORDED.search(err)
    assert len(stored(run_store)) == 1


@pytest.mark.parametrize("store", ["damaged", "under a file"])
def test_a_store_that_cannot_take_the_record_is_a_warning(
    tmp_path, server, capsys, run_store, store
):
    if store == "damaged":
        run_store.write_bytes(b"not an sqlite file " * 200)
        path = run_store
    else:
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "runs.sqlite"  # its folder cannot be made
    data = dataset(tmp_path / "d.jsonl", 2)
    code, _, err = judge(capsys, *eval_args(data, server, tmp_path, "--runs", path))
    assert code == 0, err
    (warning,) = [line for line in err.splitlines() if line.startswith("judge: warning:")]
    assert f"outputs are written in {tmp_path / 'out'}" in warning and str(path) in warning
    assert "not recorded" in warning and "--runs" in warning
    assert (tmp_path / "out" / "summary.json").is_file()


def test_processes_make_one_run_shards_none_and_merge_one(tmp_path, server, run_store):
    data = dataset(tmp_path / "d.jsonl", 4)
    together = run(*eval_args(data, server, tmp_path, "--processes", "2"))
    assert together.returncode == 0, together.stderr
    assert len(RECORDED.findall(together.stderr)) == 1
    shards = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        done = run(*eval_args(data, server, tmp_path, "--shard", f"{i}/2", "--out", out))
        assert done.returncode == 0 and "recorded" not in done.stderr, done.stderr
        shards.append(out)
    merged = run("merge", tmp_path / "merged", *shards, "--name", "joined")
    assert merged.returncode == 0 and RECORDED.search(merged.stderr), merged.stderr
    first, joined = stored(run_store)
    out, merged_out = str((tmp_path / "out").resolve()), str((tmp_path / "merged").resolve())
    assert (first.command, first.rows, first.out_dir) == ("eval", 4, out)
    assert (joined.command, joined.rows, joined.name, joined.out_dir) == (
        "merge",
        4,
        "joined",
        merged_out,
    )
    assert joined.summary == first.summary


# A run name a terminal would act on: a bidi override, an OSC title, a clear screen, C1, DEL.
HOSTILE_NAME = "run2 \u202eevil\x1b]0;pwned\x07\x1b[2J\x9b\x7f\u2066x\u2069"
RAW = ("\u202e", "\x1b", "\x07", "\x9b", "\x7f", "\u2066", "\u2069")


def test_a_run_name_with_control_and_bidi_characters_is_printed_escaped(
    tmp_path, server, capsys, run_store
):
    data = dataset(tmp_path / "d.jsonl", 2)
    code, _, err = judge(capsys, *eval_args(data, server, tmp_path, "--name", HOSTILE_NAME))
    assert code == 0, err
    (record,) = stored(run_store)
    assert record.name == HOSTILE_NAME  # kept as given; only the terminal sees escapes
    escaped = "run2 \\u202eevil\\u001b]0;pwned\\u0007\\u001b[2J\\u009b\\u007f\\u2066x\\u2069"
    for args in (["list"], ["show", record.id], ["tag", record.id, "\u202etag"]):
        code, out, err = judge(capsys, "runs", *args)
        assert code == 0, err
        assert not any(raw in out + err for raw in RAW), (args, out)
    code, out, _ = judge(capsys, "runs", "list")
    assert escaped in out
    code, out, _ = judge(capsys, "runs", "show", record.id)
    assert escaped in out and "\\u202etag" in out
    code, out, _ = judge(capsys, "runs", "list", "--json")
    assert not any(raw in out for raw in RAW)
    assert json.loads(out)[0]["name"] == HOSTILE_NAME  # still JSON of the same name
    code, _, err = judge(capsys, "runs", "show", HOSTILE_NAME + "x")
    assert code == 2 and not any(raw in err for raw in RAW) and "\\u202e" in err


def test_compare_refuses_a_run_whose_folder_a_later_run_wrote_into(
    tmp_path, server, capsys, run_store
):
    shared, other = tmp_path / "shared", tmp_path / "other"
    small, large = dataset(tmp_path / "small.jsonl", 2), dataset(tmp_path / "large.jsonl", 3)
    for data, out, name in (
        (small, shared, "first"),
        (large, shared, "second"),
        (small, other, "third"),
    ):
        args = eval_args(data, server, tmp_path, "--name", name)
        args[args.index("--out") + 1] = str(out)
        assert judge(capsys, *args)[0] == 0
    first = next(r for r in stored(run_store) if r.name == "first")
    code, out, err = judge(capsys, "compare", "first", "third")
    assert code == 2 and out == ""
    assert f"run {first.id} (first)" in err and str(shared.resolve()) in err
    assert "changed since the run was recorded" in err and "judge compare" in err
    code, out, _ = judge(capsys, "runs", "show", "first")
    assert code == 0 and "changed since recorded" in out
    assert "changed since" not in judge(capsys, "runs", "show", "second")[1]
    code, _, err = judge(capsys, "compare", "second", "third")
    assert code == 0, err
    # A run recorded before the store kept the hash: compared, with a note that it cannot
    # be checked.
    db = sqlite3.connect(run_store)
    db.execute("UPDATE runs SET results_sha256 = NULL WHERE name = 'second'")
    db.commit()
    db.close()
    code, _, err = judge(capsys, "compare", "second", "third")
    assert code == 0 and "cannot be checked" in err


def test_a_folder_given_as_the_store_says_so(tmp_path, capsys):
    folder = tmp_path / "runs"
    folder.mkdir()
    for args in (["runs", "list"], ["runs", "show", "abcd"], ["view", "--out", tmp_path / "v"]):
        code, out, err = judge(capsys, *args, "--runs", folder)
        assert code == 2, (args, out, err)
        assert f"--runs {folder} is a folder, not a run store file" in err
        assert "no runs recorded" not in out + err
    assert list(folder.iterdir()) == []  # nothing made in it


def test_compare_prints_run_folders_with_control_characters_escaped(tmp_path, server, capsys):
    data = dataset(tmp_path / "d.jsonl", 3)
    folders = [tmp_path / "base", tmp_path / "run \u202eevil\x1b[2J", tmp_path / "other"]
    for out in folders:
        args = eval_args(data, server, tmp_path, "--no-record")
        args[args.index("--out") + 1] = str(out)
        assert judge(capsys, *args)[0] == 0
    for extra in ([], ["--format", "json"]):
        code, out, err = judge(capsys, "compare", *folders, *extra)
        assert code == 0, err
        assert not any(raw in out + err for raw in RAW), out
        assert "run \\u202eevil\\u001b[2J" in out


DAMAGES = [
    ("summary", "{not json", "summary is not JSON"),
    ("rows", "many", "rows is not a whole number"),
    ("summary", '{"mrr": {"mean": 0.5, "ci_low": "x", "ci_high": 0.6, "scored": 2}}', "ci_low"),
    ("prompts", "[1, 2]", "prompts is not"),
]


@pytest.mark.parametrize(("column", "value", "what"), DAMAGES)
def test_a_damaged_record_is_shown_as_damaged_and_can_be_forgotten(
    tmp_path, capsys, column, value, what
):
    from tests.helpers.runs import record

    store = tmp_path / "runs.sqlite"
    with RunStore(store) as runs:
        good = runs.add(record(name="A", metrics=["mrr"]))
        bad = runs.add(record(name="B", metrics=["mrr"]))
    with sqlite3.connect(store) as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE name = 'B'", (value,))

    code, out, err = judge(capsys, "runs", "list", "--runs", store)
    assert code == 0, err
    row, note = [line for line in out.splitlines() if bad.id in line]
    assert row.split()[:2] == [bad.id, "B"] and "damaged" in row
    assert what in note and f"judge runs rm {bad.id}" in note
    assert good.id in out

    code, out, err = judge(capsys, "runs", "list", "--json", "--runs", store)
    assert code == 0, err
    listed = {r["id"]: r for r in json.loads(out)}
    assert what in listed[bad.id]["damaged"] and listed[good.id]["damaged"] is None

    for args in (["runs", "show", "B"], ["runs", "baseline", "B"], ["runs", "tag", "B", "t"]):
        code, out, err = judge(capsys, *args, "--runs", store)
        assert code == 2, (args, out, err)
        assert str(store) in err and bad.id in err and what in err, err
        assert "judge runs rm" in err

    code, out, err = judge(capsys, "view", "--out", tmp_path / "v", "--runs", store)
    assert code == 0, err
    assert bad.id in err and "damaged" in err
    page = (tmp_path / "v" / "data.js").read_text(encoding="utf-8")
    assert good.id in page and bad.id not in page

    code, out, err = judge(capsys, "runs", "rm", "B", "--runs", store)
    assert code == 0, err
    assert [r.id for r in stored(store)] == [good.id]
