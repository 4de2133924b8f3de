"""Odd text in and out: JSON lines split on "\\n" only (never on U+2028, U+0085 or a form
feed inside a string), lone surrogates as row errors, no hub request for a mistyped path,
and spreadsheet formulas neutralised in the CSV files judge writes."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import judge
from judge.comparison.evaluations import load_results
from judge.errors import InputFormatError
from judge.run.data import load_rows, read_records
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testset.export import load_chunks, load_items
from judge.testset.items import TestsetItem
from judge.testset.mine import read_log

# Unicode line breaks that str.splitlines() splits on and a JSON line may hold in a string.
BREAKS = {"line separator": "\u2028", "next line": "\x85", "form feed": "\x0c"}


def raw_jsonl(path: Path, records: list[dict], newline: str = "\n") -> Path:
    """JSON lines with every character kept as it is (a form feed unescaped too)."""
    lines = [json.dumps(r, ensure_ascii=False).replace("\\f", "\x0c") for r in records]
    path.write_bytes("".join(line + newline for line in lines).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("brk", BREAKS.values(), ids=BREAKS.keys())
def test_evaluation_data_keeps_a_line_break_inside_a_string(tmp_path, brk, newline):
    records = [{"question": f"Who{brk}made it?", "answer": f"a{brk}b"}, {"question": "Two?"}]
    path = raw_jsonl(tmp_path / "d.jsonl", records, newline)
    assert brk in path.read_text(encoding="utf-8")  # really raw in the file
    assert read_records(path)[0] == records
    rows, _, _ = load_rows(path)
    assert [r.sample.question for r in rows if r.sample] == [records[0]["question"], "Two?"]


def test_evaluation_data_line_numbers_count_newlines_only(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "a\u2028b"}\n{"question": "c"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"d\.jsonl:3: not JSON"):
        read_records(path)


def result_line(row: int, question: str) -> dict:
    return {
        "row": row,
        "id": f"s{row}",
        "question": question,
        "scores": {"faithfulness": 0.5 + row / 10},
        "reasons": {},
        "errors": {},
        "error": None,
    }


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("brk", BREAKS.values(), ids=BREAKS.keys())
def test_results_file_keeps_a_line_break_inside_a_string(tmp_path, brk, newline):
    path = raw_jsonl(
        tmp_path / "r.jsonl", [result_line(0, f"q{brk}0"), result_line(1, "q1")], newline
    )
    rows, _ = load_results(path)
    assert [r.question for r in rows] == [f"q{brk}0", "q1"]
    assert [r.row for r in rows] == [0, 1]


def item(question: str, chunk: str) -> dict:
    return TestsetItem(
        id="q1",
        question=question,
        reference="r",
        gold_chunk_ids=[chunk],
        gold_doc_ids=["d"],
        evidence=[],
        type="single_hop",
        hops=1,
        answerable=True,
        language="en",
        relevance={chunk: 2},
    ).model_dump(mode="json")


@pytest.mark.parametrize("brk", BREAKS.values(), ids=BREAKS.keys())
def test_testset_files_keep_a_line_break_inside_a_string(tmp_path, brk):
    raw_jsonl(tmp_path / "testset.jsonl", [item(f"Why{brk}now?", "c1")])
    chunk = {"chunk_id": "c1", "doc_id": "d", "text": f"one{brk}two", "start": 0, "end": 7}
    raw_jsonl(tmp_path / "chunks.jsonl", [chunk, {**chunk, "chunk_id": "c2"}])
    assert [i.question for i in load_items(tmp_path)] == [f"Why{brk}now?"]
    chunks = load_chunks(tmp_path)
    assert list(chunks) == ["c1", "c2"] and chunks["c1"]["text"] == f"one{brk}two"


@pytest.mark.parametrize("brk", BREAKS.values(), ids=BREAKS.keys())
def test_a_text_log_is_one_question_a_line(tmp_path, brk):
    log = tmp_path / "log.txt"
    log.write_bytes(f"How do I{brk}pay?\r\nWhere is it?\n".encode())
    assert read_log(log) == [f"How do I{brk}pay?", "Where is it?"]


def cli(*args: object, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judge", *map(str, args)], capture_output=True, text=True, **kwargs
    )


def eval_cli(data: Path, server: FakeLLMServer, out: Path, *extra: object):
    return cli(
        "eval",
        data,
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "sk-test",
        "--cache",
        out.parent / f"{out.name}.sqlite",
        "--out",
        out,
        "--no-progress",
        *extra,
    )


def test_eval_then_compare_round_trips_a_line_separator(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    records = [
        {
            "id": f"s{i}",
            "question": f"Who created\u2028Python? ({i})",
            "answer": "Guido van Rossum created Python.\u2028Yes.",
            "contexts": ["Python was created by\u2028Guido van Rossum."],
            "ground_truth": "Guido van Rossum created Python.",
        }
        for i in range(3)
    ]
    data = raw_jsonl(tmp_path / "d.jsonl", records)
    for name in ("a", "b"):
        done = eval_cli(data, fake_llm_server, tmp_path / name)
        assert done.returncode == 0, done.stderr
    written = (tmp_path / "a" / "results.jsonl").read_text(encoding="utf-8")
    assert "\u2028" in written and written.count("\n") == 3
    compared = cli("compare", tmp_path / "a", tmp_path / "b", "--format", "json")
    assert compared.returncode == 0, compared.stderr
    faithfulness = json.loads(compared.stdout)["metrics"]["faithfulness"]
    assert faithfulness["n"] == 3 and faithfulness["delta"] == 0


# Lone surrogates: what json.loads makes of "\ud800", valid JSON but not Unicode text.


def test_a_lone_surrogate_is_a_row_error_and_the_run_goes_on(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"question": "Who made Python?", "answer": "Guido.", "contexts": ["Guido made it."], '
        '"ground_truth": "Guido."}\n'
        '{"question": "bad \\ud800 text", "answer": "a", "contexts": ["c"]}\n'
        '{"question": "fine", "answer": "a", "contexts": ["c \\udfff"]}\n'
        '{"question": "fine", "answer": "a", "contexts": ["c"], "note": {"k\\ud83d": 1}}\n'
        '{"question": "Who made it?", "answer": "Guido \\ud83d\\ude00", "contexts": ["c"]}\n',
        encoding="utf-8",
    )
    rows, _, _ = load_rows(path)
    errors = [r.error for r in rows]
    assert errors[0] is None and errors[4] is None  # a surrogate pair is an emoji: fine
    assert "question" in errors[1] and "lone surrogate" in errors[1] and "\\ud800" in errors[1]
    assert "contexts" in errors[2] and "\\udfff" in errors[2]
    assert "note" in errors[3]
    assert all(r.sample is None for r in rows[1:4])
    with FakeLLMServer(chat=heuristic_judge) as server:
        result = judge.evaluate(
            path,
            metrics=["faithfulness"],
            llm=judge.LLM("openai/judge", api_base=server.base_url, api_key="sk-test"),
            cache=tmp_path / "c.sqlite",
            checkpoint=tmp_path / "checkpoint.jsonl",
            progress=False,
        )
    assert [r.error is None for r in result.rows] == [True, False, False, False, True]
    assert not math.isnan(result.rows[0].scores["faithfulness"])
    result.write_jsonl(tmp_path / "results.jsonl")
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").split("\n")
    assert "lone surrogate" in json.loads(lines[1])["error"]
    assert (tmp_path / "checkpoint.jsonl").read_bytes().decode("utf-8")  # valid UTF-8


def test_cli_eval_reports_a_lone_surrogate_row_without_a_traceback(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"question": "Who made Python?", "answer": "Guido.", "contexts": ["Guido made it."], '
        '"ground_truth": "Guido."}\n'
        '{"question": "bad \\ud800", "answer": "a", "contexts": ["c"]}\n',
        encoding="utf-8",
    )
    done = eval_cli(path, fake_llm_server, tmp_path / "out", "--max-error-rate", "1")
    assert "Traceback" not in done.stderr and done.returncode in (0, 2), done.stderr
    rows = [
        json.loads(x)
        for x in (tmp_path / "out" / "results.jsonl").read_text("utf-8").split("\n")
        if x
    ]
    assert rows[0]["error"] is None and "lone surrogate" in rows[1]["error"]


# The dataset hub is asked only for a name written hf://owner/name.


@pytest.fixture
def no_hub(monkeypatch):
    import datasets

    asked: list[tuple] = []

    def load_dataset(*args, **kwargs):
        asked.append((args, kwargs))
        raise ConnectionError("no network in tests")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return asked


@pytest.mark.parametrize("name", ["someuser/somedataset", "somedataset", "a/b/c"])
def test_a_missing_path_is_never_sent_to_the_hub(tmp_path, monkeypatch, no_hub, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputFormatError) as caught:
        read_records(name)
    assert no_hub == []
    message = str(caught.value)
    assert "no such file" in message and f"hf://{name}" in message


def test_an_hf_name_goes_to_the_hub(no_hub):
    with pytest.raises(InputFormatError, match="cannot be read"):
        read_records("hf://x/y")
    assert no_hub[0][0] == ("x/y",)
    with pytest.raises(InputFormatError):
        read_records("hf://x/y:test")
    assert no_hub[1] == (("x/y",), {"split": "test"})


def test_an_hf_dataset_with_splits_asks_for_one(monkeypatch):
    import datasets

    splits = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([{"question": "q"}]),
            "test": datasets.Dataset.from_list([]),
        }
    )
    monkeypatch.setattr(
        datasets, "load_dataset", lambda name, **kw: splits if not kw else splits[kw["split"]]
    )
    with pytest.raises(InputFormatError, match=r"hf://x/y:train"):
        read_records("hf://x/y")
    assert read_records("hf://x/y:train")[0] == [{"question": "q"}]


def test_cli_eval_of_a_mistyped_path_makes_no_hub_request(tmp_path):
    # HF_HUB_OFFLINE would hide a request; an unroutable endpoint would make it fail slowly:
    # the error must come before either, from the path alone.
    env = {
        **__import__("os").environ,
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
    }
    from judge.cache.store import Cache

    Cache(tmp_path / "c.sqlite").close()  # --replay needs a cache that exists
    done = cli(
        "eval",
        "someuser/somedataset",
        "--replay",
        "--model",
        "openai/m",
        "--cache",
        tmp_path / "c.sqlite",
        "--out",
        tmp_path / "out",
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "no such file" in done.stderr and "hf://someuser/somedataset" in done.stderr
    assert "Traceback" not in done.stderr


# CSV files opened in a spreadsheet: a text cell is never a formula.

FORMULAS = ['=HYPERLINK("http://x","y")', "+1+2", "-3+4", "@SUM(A1)", "\tx", "\rx"]


def test_results_csv_neutralises_formulas_and_keeps_numbers(tmp_path):
    import pandas

    from judge.run.results import EvaluationResult, ResultRow

    rows = [
        ResultRow(
            i, f, f, f, [f], f, scores={"faithfulness": -0.5 + i / 10}, reasons={"faithfulness": f}
        )
        for i, f in enumerate(FORMULAS)
    ]
    path = tmp_path / "r.csv"
    EvaluationResult(rows, ["faithfulness"], {}, {}).write_csv(path)
    frame = pandas.read_csv(path, keep_default_na=False, dtype=str)
    for column in ("id", "question", "answer", "ground_truth", "faithfulness_reason"):
        assert list(frame[column]) == ["'" + f for f in FORMULAS], column
    assert list(frame["faithfulness"])[:2] == ["-0.5", "-0.4"]  # numbers stay numbers
    assert list(frame["row"]) == [str(i) for i in range(len(FORMULAS))]
    assert json.loads(frame["contexts"][0]) == [FORMULAS[0]]  # a JSON list starts with [
