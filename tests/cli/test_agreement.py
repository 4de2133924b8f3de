"""`judge agreement` as a user runs it: subprocesses against the fake server, exit codes, files,
the cache making a second run free, and bad labels refused before any request."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats
from sklearn import metrics as skm

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.labels import BINARY, PAIRS, SCORES


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def agreement_args(data: Path, server: FakeLLMServer, tmp: Path, *extra: str) -> list[str]:
    return [
        "agreement",
        str(data),
        "--metric",
        "faithfulness",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "sk-agreement-secret-42",
        "--cache",
        str(tmp / "cache.sqlite"),
        "--no-progress",
        *extra,
    ]


def test_binary_writes_json_and_html_and_a_second_run_is_free(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write_jsonl(tmp_path / "labels.jsonl", BINARY)
    args = agreement_args(data, fake_llm_server, tmp_path, "--label", "faithful", "--by", "lang")
    first = run(*args, "--out", tmp_path / "out")
    assert first.returncode == 0, first.stderr
    assert "auroc" in first.stdout and "by lang:" in first.stdout
    assert "not scored: empty_answer 1" in first.stdout
    made = fake_llm_server.count()
    assert made > 0
    written = json.loads((tmp_path / "out" / "agreement.json").read_text())
    labels = [r["faithful"] for r in BINARY[:8]]
    auroc = written["overall"]["measures"]["auroc"]
    assert auroc["value"] == pytest.approx(skm.roc_auc_score(labels, SCORES))
    assert auroc["ci_low"] <= auroc["value"] <= auroc["ci_high"]
    assert set(written["groups"]) == {"en", "zh"} and written["groups"]["en"]["rows"] == 5
    assert [d["row"] for d in written["disagreements"]][:2] == [7, 6]
    page = (tmp_path / "out" / "agreement.html").read_text()
    assert "Worst disagreements" in page and "By lang" in page and "answer claims" in page

    again = run(*args, "--format", "json")
    assert again.returncode == 0, again.stderr
    assert fake_llm_server.count() == made  # every judgment came from the cache
    replayed = json.loads(again.stdout)
    assert replayed["overall"] == written["overall"] and replayed["groups"] == written["groups"]
    assert replayed["usage"]["requests"] == 0
    for path in [*(tmp_path / "out").iterdir(), *tmp_path.glob("cache.sqlite*")]:
        assert b"sk-agreement-secret-42" not in path.read_bytes(), path


def test_graded_labels_from_a_csv_file(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    grades = [5, 4, 4, 2, 1, 2, 3, 1]
    data = tmp_path / "graded.csv"
    with open(data, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, ["id", "question", "answer", "contexts", "grade"])
        writer.writeheader()
        for r, g in zip(BINARY[:8], grades, strict=True):
            writer.writerow(
                {**{k: r[k] for k in ("id", "question", "answer")}, "grade": g}
                | {"contexts": json.dumps(r["contexts"])}
            )
    done = run(
        *agreement_args(data, fake_llm_server, tmp_path, "--label", "grade", "--kind", "graded"),
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    measures = json.loads(done.stdout)["overall"]["measures"]
    assert measures["kendall_tau_b"]["value"] == pytest.approx(
        stats.kendalltau(SCORES, grades).statistic
    )
    assert measures["spearman"]["value"] == pytest.approx(stats.spearmanr(SCORES, grades).statistic)


def test_pairwise_preferences(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write_jsonl(tmp_path / "pairs.jsonl", PAIRS)
    done = run(
        *agreement_args(data, fake_llm_server, tmp_path, "--label", "better", "--pair", "pair")
    )
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert lines["accuracy"].split()[1] == "0.625" and lines["tie_rate"].split()[1] == "0.250"
    assert lines["sign_test_p"].split()[1] == "1.000" and "exact two-sided" in lines["sign_test_p"]
    assert "wins 2, ties 1, losses 1" in done.stdout


def test_one_class_is_undefined_with_a_note_and_exit_0(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write_jsonl(tmp_path / "ones.jsonl", [r for r in BINARY if r["faithful"] == 1])
    done = run(
        *agreement_args(data, fake_llm_server, tmp_path, "--label", "faithful"), "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    auroc = json.loads(done.stdout)["overall"]["measures"]["auroc"]
    assert auroc["value"] is None and auroc["ci_low"] is None
    assert auroc["note"] == "every scored row is labelled 1: needs both 0 and 1"


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        (BINARY, ["--label", "human"], "no label column 'human'"),
        (
            [*BINARY, {**BINARY[0], "faithful": 2}],
            ["--label", "faithful"],
            "binary labels in 'faithful' must be 0 or 1",
        ),
        (
            [{**r, "better": 1} for r in PAIRS],
            ["--label", "better", "--pair", "pair"],
            "exactly one of them preferred",
        ),
        (PAIRS, ["--label", "better", "--kind", "pairwise"], "need a pair column"),
    ],
)
def test_bad_labels_exit_2_before_any_request(tmp_path, fake_llm_server, rows, extra, message):
    fake_llm_server.chat = heuristic_judge
    data = write_jsonl(tmp_path / "bad.jsonl", rows)
    done = run(*agreement_args(data, fake_llm_server, tmp_path, *extra))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert fake_llm_server.count() == 0


def test_shares_the_model_options_of_eval(tmp_path, fake_llm_server):
    shown = run("agreement", "--help").stdout
    for option in ("--api-base", "--embedding-model", "--replay", "--no-cache", "--column"):
        assert option in shown
    data = write_jsonl(tmp_path / "d.jsonl", BINARY)
    no_model = run("agreement", data, "--metric", "faithfulness", "--label", "faithful")
    assert no_model.returncode == 2 and "--model is required" in no_model.stderr
    assert fake_llm_server.count() == 0
