"""The viewer's data and folder, without a browser: records to the page's data, rows of
each run's results.jsonl, runs whose folder is gone, the escaping of data.js, the CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from judge.annotate.server import ASSETS as ANNOTATE_ASSETS
from judge.errors import InputFormatError, OutputError
from judge.runs.store import RunRecord, RunStore
from judge.view import build_view
from judge.view.data import MAX_ANSWER_CHARS, data_script, run_results, view_data
from judge.view.site import ASSETS
from tests.helpers.cli import run

ROOT = Path(__file__).resolve().parents[2]


def results(folder: Path, rows: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(row) + "\n" for row in rows)
    (folder / "results.jsonl").write_text(text, encoding="utf-8")
    return folder


def row(id: str, faithfulness: float | None, answer: str = "an answer", **more: Any) -> dict:
    return {
        "row": 0,
        "id": id,
        "question": f"question {id}",
        "answer": answer,
        "contexts": ["c"],
        "scores": {"faithfulness": faithfulness},
        "reasons": {} if faithfulness is not None else {"faithfulness": "judge_error"},
        "evidence": {"faithfulness": {"claims": ["a big evidence the page does not need"]}},
        **more,
    }


def record(id: str, created: str, out_dir: Path | None, **more: Any) -> dict[str, Any]:
    return {
        "id": id,
        "name": None,
        "created": created,
        "command": "eval",
        "out_dir": None if out_dir is None else str(out_dir),
        "model": "openai/x",
        "metrics": ["faithfulness"],
        "summary": {"faithfulness": {"mean": 0.5, "ci_low": 0.25, "ci_high": 0.75, "scored": 2}},
        "rows": 2,
        "git": None,
        "app": None,
        "tags": [],
        "baseline": False,
        **more,
    }


def test_runs_in_time_order_with_the_table_and_chart_values(tmp_path: Path) -> None:
    later = record(
        "bbb",
        "2026-12-05T10:00:00Z",
        None,
        name="rerank",
        metrics=["faithfulness", "ndcg@10"],
        summary={"ndcg@10": {"mean": float("nan"), "ci_low": None, "ci_high": 1, "scored": 0}},
        git={"commit": "0123456789abcdef" * 2 + "01234567", "dirty": True, "root": "/r"},
        app={"target": "app.py:answer", "fingerprint": "f"},
        tags=["v2", 3],
        baseline=True,
    )
    data = view_data([later, record("aaa", "2026-12-04T10:00:00Z", None)])
    assert [r["id"] for r in data["runs"]] == ["aaa", "bbb"]
    assert data["metrics"] == ["faithfulness", "ndcg@10"]
    assert data["baseline"] == "bbb"
    run = data["runs"][1]
    assert run["git"] == {"commit": "01234567", "dirty": True}
    assert run["app"] == "app.py:answer"
    assert run["tags"] == ["v2", "3"]
    # NaN and missing numbers are null: the chart leaves a gap, the table a dash.
    assert run["summary"]["ndcg@10"] == {"mean": None, "ci_low": None, "ci_high": 1, "scored": 0}


def test_no_baseline_and_no_runs() -> None:
    assert view_data([]) == {"metrics": [], "runs": [], "baseline": None, "results": {}}
    assert view_data([record("a", "2026", None)])["baseline"] is None


def test_a_record_without_an_id_or_given_twice_is_refused() -> None:
    with pytest.raises(InputFormatError, match="run record 2 has no id"):
        view_data([record("a", "2026", None), {"name": "x"}])
    with pytest.raises(InputFormatError, match="run a is given twice"):
        view_data([record("a", "2026", None), record("a", "2027", None)])


def test_each_run_keeps_what_the_drill_down_needs_of_its_rows(tmp_path: Path) -> None:
    folder = results(
        tmp_path / "run",
        [
            row("q1", 0.5),
            row("q2", None),
            row("q3", None, error="row 3: no question"),  # unreadable input: no scores
            row("q4", 1.0, answer="x" * (MAX_ANSWER_CHARS + 10)),
        ],
    )
    got = run_results(str(folder))
    assert got["status"] == "ok" and got["skipped"] == 1
    first, second, fourth = got["rows"]
    assert first == {
        "id": "q1",
        "question": "question q1",
        "answer": "an answer",
        "scores": {"faithfulness": 0.5},
        "reasons": {},
    }
    assert second["scores"] == {"faithfulness": None}
    assert second["reasons"] == {"faithfulness": "judge_error"}
    assert fourth["answer"].startswith("x" * MAX_ANSWER_CHARS)
    assert fourth["answer"].endswith(f"[…cut at {MAX_ANSWER_CHARS} characters]")


def test_a_turn_keeps_its_conversation_contexts_and_claims_with_their_sources(
    tmp_path: Path,
) -> None:
    evidence = {
        "answer_claims": ["From the user.", "From a context.", "Invented.", "Odd."],
        "answer_verdicts": [
            {"claim": 0, "verdict": "supported", "reason": "r0", "source": "history",
             "turn": 1, "role": "user", "context": "conversation, turn 1 (user)"},
            {"claim": 1, "verdict": "supported", "reason": "r1", "source": "contexts",
             "context": 1},
            {"claim": 2, "verdict": "not_found", "reason": "r2", "source": None},
            {"claim": 9, "verdict": "supported", "context": True},  # no such claim; no source
            "not a verdict",
        ],
    }  # fmt: skip
    turn = row("c#4", 0.5, conversation_id="c", turn=4, evidence=evidence)
    turn["contexts"] = ["one", "y" * 2100]
    folder = results(tmp_path / "run", [turn, row("q1", 1.0)])
    chat, plain = run_results(str(folder))["rows"]
    assert (chat["conversation_id"], chat["turn"]) == ("c", 4)
    assert chat["contexts"][0] == "one" and chat["contexts"][1].endswith("characters]")
    assert chat["claims"] == [
        {"number": 1, "claim": "From the user.", "verdict": "supported", "reason": "r0",
         "source": "history", "turn": 1, "role": "user"},
        {"number": 2, "claim": "From a context.", "verdict": "supported", "reason": "r1",
         "source": "contexts", "context": 2},
        {"number": 3, "claim": "Invented.", "verdict": "not_found", "reason": "r2",
         "source": None},
        {"number": None, "claim": None, "verdict": "supported", "reason": None, "source": None},
    ]  # fmt: skip
    # a row that is no turn carries what it always did: the page's data is as before
    assert set(plain) == {"id", "question", "answer", "scores", "reasons"}


def test_a_long_question_is_cut_but_matched_whole(tmp_path: Path) -> None:
    question = "why? " * 400
    folder = results(tmp_path / "run", [row("q1", 0.5) | {"question": question}])
    (shown,) = run_results(str(folder))["rows"]
    assert len(shown["question"]) < len(question)
    assert shown["question_key"] == question


def test_runs_without_their_rows_stay_with_the_reason(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    empty = tmp_path / "empty"
    empty.mkdir()
    damaged = results(tmp_path / "damaged", [row("q1", 0.5)])
    with (damaged / "results.jsonl").open("a") as out:
        out.write("{not json\n")
    data = view_data(
        [
            record("a", "2026-01", gone),
            record("b", "2026-02", empty),
            record("c", "2026-03", damaged),
            record("d", "2026-04", None),
        ]
    )
    assert [r["id"] for r in data["runs"]] == ["a", "b", "c", "d"]  # all in table and charts
    got = data["results"]
    assert got["a"] == {"status": "missing", "message": f"the run's folder {gone} is gone"}
    assert got["b"] == {
        "status": "missing",
        "message": f"the run's folder {empty} has no results.jsonl",
    }
    assert got["c"]["status"] == "unreadable"
    assert f"{damaged / 'results.jsonl'}:2: not JSON" in got["c"]["message"]
    assert got["d"]["message"] == "the run recorded no output folder"


def test_data_js_holds_no_markup_and_reads_back_as_the_data() -> None:
    hostile = "</script><script>alert(1)</script> & \u2028 <!--"
    data = {"runs": [{"name": hostile, "mean": float("nan")}]}
    script = data_script(data)
    assert script.startswith("window.JUDGE_VIEW = ") and script.endswith(";\n")
    body = script[len("window.JUDGE_VIEW = ") : -2]
    for char in "<>&\u2028":
        assert char not in body
    assert json.loads(body) == {"runs": [{"name": hostile, "mean": None}]}


def test_the_folder_has_the_page_its_data_and_the_shipped_assets(tmp_path: Path) -> None:
    index = build_view([record("a", "2026", None, name="<b>bold</b>")], tmp_path / "v")
    assert index == tmp_path / "v" / "index.html"
    html = index.read_text(encoding="utf-8")
    # Scripts are loaded with script tags (file:// allows no fetch), none from elsewhere.
    for src in ("data.js", "assets/chart.umd.js", "assets/view.js"):
        assert f'<script src="{src}"></script>' in html
    assert "http://" not in html and "https://" not in html
    assert "<b>bold</b>" not in (tmp_path / "v" / "data.js").read_text(encoding="utf-8")
    for name in ASSETS:
        shipped = ROOT / "judge" / "view" / "assets" / name
        assert (tmp_path / "v" / "assets" / name).read_bytes() == shipped.read_bytes()
    chart = (tmp_path / "v" / "assets" / "chart.umd.js").read_text(encoding="utf-8")
    assert chart.startswith("/*!\n * Chart.js v4.")
    assert "MIT License" in (tmp_path / "v" / "assets" / "chart.js.LICENSE.md").read_text()


def test_a_file_in_the_way_is_an_output_error(tmp_path: Path) -> None:
    (tmp_path / "v").write_text("not a folder")
    with pytest.raises(OutputError, match="cannot write the view into"):
        build_view([], tmp_path / "v")


def test_judge_view_writes_the_runs_of_the_store_and_prints_its_page(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.sqlite") as store:
        stored = record("a1b2c3d4e5f6", "2026-12-04T10:00:00Z", tmp_path / "gone")
        extra = {"data": "q.jsonl", "data_sha256": "0", "embeddings": None, "prompts": {}}
        store.add(RunRecord(**stored, **extra))
    done = run("view", "--runs", tmp_path / "runs.sqlite", "--out", tmp_path / "v")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote {(tmp_path / 'v' / 'index.html').resolve()}\n"
    assert (tmp_path / "v" / "assets" / "view.js").is_file()
    page_data = (tmp_path / "v" / "data.js").read_text(encoding="utf-8")
    assert "a1b2c3d4e5f6" in page_data


@pytest.mark.parametrize(
    ("store", "message"),
    [
        (False, "no run store at {path}: judge eval, judge merge and judge experiment record"),
        (True, "the run store {path} holds no runs yet"),
    ],
)
def test_judge_view_says_when_there_is_nothing_to_show(
    tmp_path: Path, store: bool, message: str
) -> None:
    path = tmp_path / "runs.sqlite"
    if store:
        RunStore(path).close()
    done = run("view", "--runs", path, "--out", tmp_path / "v")
    assert done.returncode == 2
    assert done.stderr.startswith("judge: error: ")
    assert message.format(path=path) in done.stderr
    assert not (tmp_path / "v").exists()


def test_the_wheel_ships_the_assets(tmp_path: Path) -> None:
    wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*wheel, "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (built_wheel,) = tmp_path.glob("judge-*.whl")
    names = set(zipfile.ZipFile(built_wheel).namelist())
    assert {f"judge/view/assets/{name}" for name in ASSETS} <= names
    # judge annotate's page too
    page = {"annotate.html", *ANNOTATE_ASSETS}
    assert {f"judge/annotate/assets/{name}" for name in page} <= names


def test_a_folder_another_run_wrote_into_since_shows_none_of_its_rows(tmp_path: Path) -> None:
    folder = results(tmp_path / "run", [row("q1", 0.5), row("q2", 0.5)])
    first = hashlib.sha256((folder / "results.jsonl").read_bytes()).hexdigest()
    results(folder, [row("q1", 1.0), row("q9", 0.0)])  # a later run given the same --out
    second = hashlib.sha256((folder / "results.jsonl").read_bytes()).hexdigest()
    data = view_data(
        [
            record("a", "2026-01", folder, results_sha256=first),
            record("b", "2026-02", folder, results_sha256=second),
            record("c", "2026-03", folder),  # recorded by an older judge: no hash
        ]
    )
    got = data["results"]
    assert got["a"]["status"] == "changed" and "rows" not in got["a"]
    assert "folder changed since recorded" in got["a"]["message"]
    assert str(folder) in got["a"]["message"]
    assert got["b"]["status"] == "ok" and got["b"]["verified"] is True
    assert [r["id"] for r in got["b"]["rows"]] == ["q1", "q9"]
    # Not refused: shown, marked as rows that cannot be checked against the run.
    assert got["c"]["status"] == "ok" and got["c"]["verified"] is False
    assert len(got["c"]["rows"]) == 2
