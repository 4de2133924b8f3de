"""The run folder has one owner (`judge.run.folder`): its file names are literals there
only, a run is read back with its rows checked (`judge.load_run`, judge compare, judge view,
the trace export refuse a folder changed after the run), and a run written from Python is
recorded in the run store like the CLI's."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from pathlib import Path

import pytest

import judge
import judge.run.folder as folder_module
from judge.errors import JudgeError
from judge.run.checkpoint import RowFile
from judge.run.folder import RunChangedError
from judge.runs.store import RunStore
from judge.view.data import run_results
from tests.helpers.cli import run

PACKAGE = Path(judge.__file__).parent
# qrels.txt is also the name of a test set folder's labels (judge/testset owns those)
NAMES = {
    value
    for name, value in vars(folder_module).items()
    if name.isupper() and isinstance(value, str) and "." in value and name != "QRELS"
}


def rows(n: int = 6) -> list[dict]:
    """Rows scored without a judge model (retrieval metrics), each a trace's."""
    return [
        {
            "id": f"{0xABC0 + i:032x}",
            "trace_id": f"{0xABC0 + i:032x}",
            "span_id": f"{0x5EA0 + i:016x}",
            "question": f"Who created Python? ({i})",
            "answer": "Guido van Rossum.",
            "contexts": ["Python was created by Guido van Rossum."],
            "retrieved_ids": ["d1", "d2", "d3"],
            "relevance": ["d1"] if i % 2 else ["d3"],
        }
        for i in range(n)
    ]


def written(tmp_path: Path, **write: object) -> Path:
    out = tmp_path / "out"
    result = judge.evaluate(rows(), metrics=["ndcg@10", "mrr"], progress=False)
    result.write(out, **write)  # type: ignore[arg-type]
    return out


def one_byte_changed(out: Path) -> None:
    path = out / "results.jsonl"
    data = path.read_bytes()
    at = data.index(b"Guido")
    path.write_bytes(data[:at] + b"H" + data[at + 1 :])  # still a valid row


def a_row_removed(out: Path) -> None:
    path = out / "results.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))


def summary_edited(out: Path) -> None:
    path = out / "summary.json"
    summary = json.loads(path.read_text())
    summary["metrics"]["ndcg@10"]["mean"] = 0.99  # a better-looking run
    path.write_text(json.dumps(summary, indent=2))


def mean_not_a_number(out: Path) -> None:
    path = out / "summary.json"
    summary = json.loads(path.read_text())
    summary["metrics"]["ndcg@10"]["mean"] = "high"  # read as a number, it was a traceback
    summary["metrics"]["mrr"]["mean"] = [0.9]
    path.write_text(json.dumps(summary, indent=2))


TAMPERINGS: dict[str, tuple[Callable[[Path], None], str]] = {
    "one byte changed": (one_byte_changed, r"its bytes differ from those the run wrote"),
    "a row removed": (a_row_removed, r"it holds 5 rows, the run wrote 6"),
    "summary.json edited": (summary_edited, r"says the mean of ndcg@10 is 0\.99"),
    "a mean not a number": (mean_not_a_number, r"says the mean of ndcg@10 is 'high'"),
}
tamperings = pytest.mark.parametrize("tamper, said", TAMPERINGS.values(), ids=list(TAMPERINGS))


def test_the_run_folder_names_are_string_literals_of_one_module_only():
    assert {"results.jsonl", "summary.json", ".checkpoint.jsonl", "report.html"} <= NAMES
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(folder_module.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value}")
    assert found == [], "name the run folder's files through judge.run.folder.RunFolder"


def test_load_run_gives_the_result_written_with_its_rows_read_lazily(tmp_path):
    out = tmp_path / "out"
    result = judge.evaluate(rows(), metrics=["ndcg@10", "mrr"], progress=False)
    result.write(out, record=False)
    loaded = judge.load_run(out)
    assert isinstance(loaded.rows, RowFile)  # read from disk when asked, not held
    assert loaded.summary_dict() == result.summary_dict()
    assert [r.to_json() for r in loaded.rows] == [r.to_json() for r in result.rows]
    assert judge.load_run(out / "results.jsonl").summary == loaded.summary


def test_load_run_takes_a_run_id_of_the_run_store(tmp_path, run_store):
    out = written(tmp_path)
    with RunStore(run_store) as store:
        (record,) = store.runs()
    assert record.command == "python" and record.out_dir == str(out.resolve())
    assert judge.load_run(record.id).summary == judge.load_run(out).summary
    with pytest.raises(JudgeError, match="no run 'nope'"):
        judge.load_run("nope")


@tamperings
def test_load_run_refuses_a_folder_changed_after_the_run(tmp_path, tamper, said):
    out = written(tmp_path)
    tamper(out)
    with pytest.raises(RunChangedError, match=said) as caught:
        judge.load_run(out)
    assert str(out) in str(caught.value) and "rerun" in str(caught.value)


def test_load_run_by_id_refuses_a_folder_a_later_run_wrote_into(tmp_path, run_store):
    out = written(tmp_path)
    with RunStore(run_store) as store:
        (first,) = store.runs()
    judge.evaluate(rows(4), metrics=["mrr"], progress=False).write(out, record=False)
    with pytest.raises(RunChangedError, match="sha256 the run store recorded"):
        judge.load_run(first.id)


@tamperings
def test_judge_compare_refuses_a_folder_changed_after_the_run(tmp_path, tamper, said):
    out = written(tmp_path, record=False)
    other = tmp_path / "other"
    judge.evaluate(rows(), metrics=["ndcg@10", "mrr"], progress=False).write(other, record=False)
    tamper(out)
    done = run("compare", other, out)
    assert done.returncode == 2, done.stderr
    assert "changed after the run" in done.stderr and str(out) in done.stderr


@tamperings
def test_the_trace_export_refuses_a_folder_changed_after_the_run(tmp_path, tamper, said):
    out = written(tmp_path, record=False)
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    exported = tmp_path / "events.jsonl"
    done = run("traces", "export", out, "--rows", rows_file, "--otlp-json", exported)
    assert done.returncode == 0, done.stderr
    exported.unlink()
    tamper(out)
    done = run("traces", "export", out, "--rows", rows_file, "--otlp-json", exported)
    assert done.returncode == 2, done.stderr
    assert "changed after the run" in done.stderr and not exported.exists()


@pytest.mark.parametrize("tamper", [one_byte_changed, a_row_removed])
def test_judge_view_shows_no_rows_of_a_folder_changed_after_the_run(tmp_path, tamper):
    out = written(tmp_path, record=False)
    assert run_results(str(out))["status"] == "ok"
    tamper(out)
    got = run_results(str(out))  # no hash in the record: summary.json's is checked
    assert got["status"] == "changed" and "rows" not in got
    assert "changed after the run" in got["message"]


def test_a_run_written_from_python_is_in_judge_runs_and_judge_view(tmp_path, run_store):
    out = written(tmp_path)
    listed = run("runs", "list")
    assert listed.returncode == 0, listed.stderr
    with RunStore(run_store) as store:
        (record,) = store.runs()
    assert record.id in listed.stdout and "python" in listed.stdout
    site = tmp_path / "site"
    viewed = run("view", "--out", site)
    assert viewed.returncode == 0, viewed.stderr
    data = next(site.rglob("data.js")).read_text()
    assert record.id in data and str(out.resolve()) in data


def test_record_false_leaves_the_run_store_alone(tmp_path, run_store):
    written(tmp_path, record=False)
    assert not Path(run_store).exists() or RunStore(run_store).runs() == []


def test_judge_experiment_from_python_is_recorded(tmp_path, run_store):
    testset = tmp_path / "testset.jsonl"
    testset.write_text(
        "".join(
            json.dumps({"id": r["id"], "question": r["question"], "relevance": r["relevance"]})
            + "\n"
            for r in rows()
        )
    )

    def app(question: str) -> dict:
        return {"answer": "Guido.", "contexts": ["c"], "retrieved_ids": ["d1", "d3"]}

    judge.experiment(app, testset, out=tmp_path / "exp", progress=False)
    with RunStore(run_store) as store:
        (record,) = store.runs()
    assert record.command == "experiment" and record.out_dir == str((tmp_path / "exp").resolve())


def test_load_run_refuses_a_results_file_no_summary_vouches_for(tmp_path):
    """A copy of results.jsonl edited beside the run was read unchecked and given the
    folder's summary.json config: a run's fingerprint on rows it never wrote."""
    out = written(tmp_path, record=False)
    edited = out / "edited.jsonl"
    edited.write_bytes((out / "results.jsonl").read_bytes().replace(b"Guido", b"Hugo!"))
    with pytest.raises(JudgeError, match=r"edited\.jsonl is not a run's results\.jsonl"):
        judge.load_run(edited)
    assert judge.load_run(out / "results.jsonl").summary == judge.load_run(out).summary


def test_a_folder_as_judge_runs_is_named_as_the_variable_and_the_run_is_written(
    tmp_path, monkeypatch
):
    """JUDGE_RUNS set to a folder: the run is written all the same, and the warning names
    the variable the user set (it said runs='...', a keyword the user never gave)."""
    folder = tmp_path / "store"
    folder.mkdir()
    monkeypatch.setenv("JUDGE_RUNS", str(folder))
    with pytest.warns(UserWarning, match=r"JUDGE_RUNS=.* is a folder, not a run store file"):
        out = written(tmp_path)
    assert judge.load_run(out).summary["mrr"].scored == 6
    assert list(folder.iterdir()) == []


def test_a_summary_json_cannot_turn_a_built_in_metric_upside_down(tmp_path):
    """summary.json's config.lower_is_better is not covered by results.jsonl's sha256: an
    edit naming mrr there made compare count a drop of mrr as a gain, and a plain
    threshold of assert_evaluation a cap. A built-in's direction is judge's own."""
    good = written(tmp_path, record=False)
    bad = tmp_path / "bad"
    worse = [{**r, "retrieved_ids": ["d9", "d8", "d1", "d3"]} for r in rows(12)]
    judge.evaluate(rows(12), metrics=["ndcg@10", "mrr"], progress=False).write(good, record=False)
    judge.evaluate(worse, metrics=["ndcg@10", "mrr"], progress=False).write(bad, record=False)
    path = bad / "summary.json"
    summary = json.loads(path.read_text())
    summary["config"]["lower_is_better"] = ["mrr", "ndcg@10"]
    path.write_text(json.dumps(summary, indent=2))
    loaded = judge.load_run(bad)
    assert loaded.summary["mrr"].mean < 0.5
    with pytest.raises(AssertionError, match="mrr"):
        judge.assert_evaluation(loaded, fail_under={"mrr": 0.9})
    done = run("compare", good, bad, "--fail-on-regression")
    assert done.returncode == 1, done.stdout + done.stderr
