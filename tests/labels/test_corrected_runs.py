"""A judged mean corrected by labels where runs are written and compared: `judge eval
--labels` (summary.json's `label_corrected`, the report's line, gates held to the corrected
interval), `EvaluationResult.write(labels=...)`, and `judge compare --labels-a/--labels-b`
(the paired difference B - A)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import judge
from judge.errors import InputFormatError, JudgeError
from judge.labels.estimate import Labels
from judge.run.rows import ResultRow
from judge.testing import heuristic_judge
from tests.helpers.cli import run
from tests.helpers.corrected_runs import (
    CHOSEN,
    PEOPLE,
    SAMPLE,
    SCORES,
    data_file,
    eval_command,
    labels_file,
    write_jsonl,
    write_run,
)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return data_file(tmp_path)


def direct() -> judge.PPIEstimate:
    rest = [s for i, s in enumerate(SCORES) if i not in CHOSEN]
    return judge.ppi_mean(rest, [SCORES[i] for i in CHOSEN], [PEOPLE[i] for i in CHOSEN])


def test_a_gate_met_by_the_judges_mean_fails_on_the_corrected_lower_end(
    tmp_path, data, fake_llm_server
):
    fake_llm_server.chat = heuristic_judge
    gate = ("--gate", "faithfulness>=0.7")
    plain = run(*eval_command(data, fake_llm_server, tmp_path / "plain", *gate))
    assert plain.returncode == 0, plain.stderr  # the judge alone: 0.944 >= 0.7
    labels = labels_file(tmp_path / "labels.jsonl")
    requests = len(fake_llm_server.requests)
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", *gate),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert len(fake_llm_server.requests) == requests  # replayed from the cache
    assert done.returncode == 1, done.stderr
    expected = direct()
    low = f"{expected.low:.4f}"
    missed = f"faithfulness: the label-corrected (PPI) interval's lower end {low} < 0.7"
    assert f"FAILED threshold: {missed}" in done.stderr
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    ran = summary["metrics"]["faithfulness"]
    # the judge alone as the run's table says it, above the line
    line = (
        f"faithfulness corrected by 30 labels: {expected.mean:.3f} [{expected.low:.3f}, "
        f"{expected.high:.3f}] (judge alone: 0.944 [{ran['ci_low']:.3f}, "
        f"{ran['ci_high']:.3f}]; 95% intervals)"
    )
    assert line in done.stdout
    assert "gates on faithfulness: checked on its corrected interval" in done.stdout
    corrected = summary["label_corrected"]
    assert corrected["judge_only"] == {
        "mean": ran["mean"],
        "low": ran["ci_low"],
        "high": ran["ci_high"],
        "n": 60,
    }
    assert corrected["ppi"]["mean"] == pytest.approx(expected.mean, abs=1e-12)
    assert (corrected["ppi"]["low"], corrected["ppi"]["high"]) == pytest.approx(
        (expected.low, expected.high), abs=1e-12
    )
    assert corrected["n_labelled"] == 30 and corrected["n_unlabelled"] == 30
    assert corrected["metric"] == "faithfulness" and corrected["random_sample"] is True
    assert corrected["labels"] == str(labels) and corrected["warnings"] == []
    assert summary["thresholds"]["missed"] == [missed]
    assert summary["thresholds"]["on_corrected_interval"] == ["faithfulness"]
    assert f"<p class=corrected>{line}</p>" in (tmp_path / "out/report.html").read_text()
    # the corrected lower end meets a lower floor: the run passes
    passed = run(
        *eval_command(
            data,
            fake_llm_server,
            tmp_path / "low",
            "--gate",
            f"faithfulness>={expected.low - 0.01:.3f}",
        ),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert passed.returncode == 0, passed.stderr
    assert passed.stderr.count("judge: warning") == 0


def test_labels_outside_a_random_sample_are_warned_about_or_refused_before_any_request(
    tmp_path, data, fake_llm_server
):
    fake_llm_server.chat = heuristic_judge
    picked = labels_file(tmp_path / "picked.jsonl", sample=None)
    out = tmp_path / "out"
    refused = run(
        *eval_command(data, fake_llm_server, out),
        "--labels",
        picked,
        "--label",
        "faithful",
        "--require-random",
    )
    assert refused.returncode == 2 and fake_llm_server.requests == []
    assert "30 of 30 labelled rows record no random sample" in refused.stderr
    assert "leave out --require-random" in refused.stderr
    warned = run(
        *eval_command(data, fake_llm_server, out), "--labels", picked, "--label", "faithful"
    )
    assert warned.returncode == 0, warned.stderr
    assert "judge: warning: 30 of 30 labelled rows record no random sample" in warned.stderr
    assert "--require-random refuses such labels" in warned.stderr
    warnings = json.loads((out / "summary.json").read_text())["label_corrected"]["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("30 of 30 labelled rows")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--labels", "{labels}"],
            "--labels {labels}: name the labels' column with --label COLUMN",
        ),
        (["--label", "faithful"], "--label goes with --labels FILE"),
        (
            ["--labels", "{labels}", "--label", "faithful", "--label-metric", "context_recall"],
            "--label-metric context_recall, but the labels are of 'faithfulness'",
        ),
        (
            ["--labels", "{labels}", "--label", "ok"],
            "no label column 'ok' (columns: annotator, faithful, id, metric, sample); name the "
            "right one with --label",
        ),
        (
            ["--labels", "{labels}", "--label", "faithful", "--shard", "1/2"],
            "--shard judges part of it: give --labels to judge merge",
        ),
    ],
)
def test_label_options_that_cannot_work_fail_before_any_request(
    tmp_path, data, fake_llm_server, flags, message
):
    labels = str(labels_file(tmp_path / "labels.jsonl"))
    given = [f.format(labels=labels) for f in flags]
    done = run(*eval_command(data, fake_llm_server, tmp_path / "out"), *given)
    assert done.returncode == 2 and fake_llm_server.requests == []
    assert message.format(labels=labels) in done.stderr


def test_write_with_labels_only_adds_the_correction(tmp_path, data, models):
    results = judge.evaluate(data, metrics=["faithfulness"], llm=models["llm"], progress=False)
    plain = results.write(tmp_path / "plain", gates=["faithfulness>=0.7"], record=False)
    results.write(tmp_path / "again", gates=["faithfulness>=0.7"], record=False)
    assert plain.code == 0 and plain.corrected is None
    labels = Labels(labels_file(tmp_path / "labels.jsonl"), label="faithful")
    corrected = results.write(
        tmp_path / "labelled", gates=["faithfulness>=0.7"], labels=labels, record=False
    )
    assert corrected.code == 1 and corrected.corrected is not None
    assert corrected.corrected.interval == pytest.approx((direct().low, direct().high))
    # a run without labels: the same bytes, and no key of the labels
    for name in ("summary.json", "report.html"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    summary = json.loads((tmp_path / "plain/summary.json").read_text())
    assert "label_corrected" not in summary
    assert sorted(summary["thresholds"]) == ["gates", "missed", "required"]
    # with labels: the same summary and report, plus the correction
    labelled = json.loads((tmp_path / "labelled/summary.json").read_text())
    assert labelled.pop("label_corrected")["ppi"]["mean"] == pytest.approx(direct().mean)
    assert labelled["thresholds"].pop("on_corrected_interval") == ["faithfulness"]
    assert labelled["thresholds"].pop("missed") != summary["thresholds"].pop("missed")
    assert labelled == summary
    report = (tmp_path / "labelled/report.html").read_text()
    line = f"<p class=corrected>{corrected.corrected.line}</p>"
    assert report.count(line) == 1
    assert report.replace(line, "") == (tmp_path / "plain/report.html").read_text()


def test_the_labelled_metric_is_named_or_found(tmp_path):
    rows = [
        ResultRow(row=i, id=f"r{i}", scores={"faithfulness": s, "context_recall": 1 - s})
        for i, s in enumerate(SCORES)
    ]
    view = type("View", (), {})()
    view.rows = rows
    view.summary = {}
    view.config = type("Config", (), {"source": "data.jsonl", "lower_is_better": []})()
    unnamed = labels_file(tmp_path / "unnamed.jsonl", metric=None)
    gates = judge.Gates.of(["faithfulness>=0.5"])
    # no metric field: the only gated metric
    assert Labels(unnamed, label="faithful").correct(view, gates).metric == "faithfulness"
    with pytest.raises(InputFormatError, match=r"which metric are the labels of.*metric="):
        Labels(unnamed, label="faithful").correct(view, judge.Gates())
    named = Labels(unnamed, label="faithful", metric="context_recall").correct(view, gates)
    assert named.metric == "context_recall"
    # the labels' metric field wins over the gates, and a metric= naming another is refused
    recorded = labels_file(tmp_path / "recorded.jsonl", metric="context_recall")
    assert Labels(recorded, label="faithful").correct(view, gates).metric == "context_recall"
    with pytest.raises(InputFormatError, match="metric='faithfulness', but the labels are of"):
        Labels(recorded, label="faithful", metric="faithfulness").correct(view, gates)
    # require_random: on the labels of the run's rows (a label of no row is left out)
    with pytest.raises(JudgeError, match="require_random="):
        Labels(
            labels_file(tmp_path / "p.jsonl", sample=None), label="faithful", require_random=True
        ).correct(view, gates)


def test_compare_shows_the_corrected_difference_beside_the_judges(tmp_path):
    # B's judge scores every row 1 (lenient); people find B better on the rows A got wrong
    scores_b = [1.0] * len(SCORES)
    people_b = [1 - y if i % 3 == 0 else y for i, y in enumerate(PEOPLE)]
    a = write_run(tmp_path / "a", SCORES)
    b = write_run(tmp_path / "b", scores_b)
    labels_a = labels_file(tmp_path / "a.jsonl")
    labels_b = labels_file(tmp_path / "b.jsonl", people_b)
    args = ["compare", a, b, "--labels-a", labels_a, "--labels-b", labels_b, "--label", "faithful"]
    shown = run(*args, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    rest = [i for i in range(len(SCORES)) if i not in CHOSEN]
    expected = judge.ppi_mean_difference(
        judged_a=[SCORES[i] for i in rest],
        judged_b=[scores_b[i] for i in rest],
        judged_labelled_a=[SCORES[i] for i in CHOSEN],
        judged_labelled_b=[scores_b[i] for i in CHOSEN],
        labels_a=[PEOPLE[i] for i in CHOSEN],
        labels_b=[people_b[i] for i in CHOSEN],
    )
    data = json.loads(shown.stdout)
    corrected = data["label_corrected"]
    assert corrected["of"] == "B - A" and corrected["metric"] == "faithfulness"
    assert (corrected["ppi"]["mean"], corrected["ppi"]["low"], corrected["ppi"]["high"]) == (
        pytest.approx((expected.mean, expected.low, expected.high), abs=1e-12)
    )
    assert corrected["n_labelled"] == 30 and corrected["n_unlabelled"] == 30
    # the judge-only difference is the comparison's own
    assert corrected["judge_only"]["mean"] == pytest.approx(
        data["metrics"]["faithfulness"]["delta"]
    )
    text = run(*args)
    assert text.returncode == 0
    assert "faithfulness (score), B - A, against labels 'faithful'" in text.stdout
    ppi_row = f"PPI          {expected.mean:7.3f}"
    assert ppi_row in text.stdout and text.stdout.index("Δ") < text.stdout.index(ppi_row)
    # a labelled row of one run alone is counted unlabelled, and said
    some = write_jsonl(tmp_path / "some.jsonl", json_lines(labels_b)[:-1])
    partial = run(
        "compare", a, b, "--labels-a", labels_a, "--labels-b", some, "--label", "faithful"
    )
    assert partial.returncode == 0
    assert "judge: warning: 1 rows are labelled for one run only, counted as unlabelled" in (
        partial.stderr
    )


def test_compare_html_shows_the_corrected_difference_beside_the_judges(tmp_path):
    """compare.html had the judge's difference alone: the labels' correction was in the
    terminal and comparison.json only."""
    from tests.helpers.report_page import parse

    a = write_run(tmp_path / "a", SCORES)
    b = write_run(tmp_path / "b", [1.0] * len(SCORES))  # a lenient judge of B
    labels_a = labels_file(tmp_path / "a.jsonl")
    labels_b = labels_file(tmp_path / "b.jsonl", [0] * len(PEOPLE))  # people: B is worse
    flags = ["--labels-a", labels_a, "--labels-b", labels_b, "--label", "faithful"]
    done = run("compare", a, b, *flags, "--out", tmp_path / "labelled")
    assert done.returncode == 0, done.stderr
    found = json.loads((tmp_path / "labelled/comparison.json").read_text())["label_corrected"]
    ppi, alone = found["ppi"], found["judge_only"]
    html = (tmp_path / "labelled/compare.html").read_text()
    shown = " ".join(parse(html).sections["Corrected by people's labels"].split())
    for name, e, n in (
        ("judge only", alone, 60),
        ("labels only", found["labels_only"], 30),
        ("PPI", ppi, 60),
    ):
        # the cells' texts, run together by the parser
        assert f"{name}{e['mean']:+.3f}[{e['low']:+.3f}, {e['high']:+.3f}]{n}" in shown
    assert alone["mean"] > 0 > ppi["high"]  # the judge's gain, the labels' loss: both shown
    assert "by the labels, B is worse: the corrected interval lies wholly below 0" in shown
    assert "faithfulness (score), B - A, against labels 'faithful': 30 rows labelled" in shown
    # without labels, the page is as it was: the section is all the labels add
    assert run("compare", a, b, "--out", tmp_path / "plain").returncode == 0
    start = html.index("<h2>Corrected by people's labels</h2>")
    end = html.index("<h2>", start + 1)
    assert html[:start] + html[end:] == (tmp_path / "plain/compare.html").read_text()


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--labels-a", "{a}", "--label", "faithful"],
            "--labels-b is missing: the label-corrected",
        ),
        (["--labels-b", "{a}", "--label", "faithful"], "--labels-a is missing"),
        (["--labels", "{a}", "--label", "faithful"], "judge compare takes one labels file per run"),
        (["--labels-a", "{a}", "--labels-b", "{a}"], "name the labels' column with --label COLUMN"),
        (["--label", "faithful"], "--label goes with --labels-a FILE --labels-b FILE"),
    ],
)
def test_compare_refuses_labels_of_one_run_alone(tmp_path, flags, message):
    a = write_run(tmp_path / "a", SCORES)
    b = write_run(tmp_path / "b", SCORES)
    labels = str(labels_file(tmp_path / "a.jsonl"))
    done = run("compare", a, b, *[f.format(a=labels) for f in flags])
    assert done.returncode == 2 and done.stdout == ""
    assert message in done.stderr


def test_a_lower_is_better_metric_is_capped_by_its_corrected_upper_end(tmp_path):
    view = type("View", (), {})()
    view.rows = [
        ResultRow(row=i, id=f"r{i}", scores={"hallucination_rate": 1 - s})
        for i, s in enumerate(SCORES)
    ]
    view.summary = {}
    view.config = type("Config", (), {"source": "data.jsonl", "lower_is_better": []})()
    labels = labels_file(tmp_path / "labels.jsonl", metric="hallucination_rate")
    gates = judge.Gates.of(["hallucination_rate<=0.7"])
    corrected = Labels(labels, label="faithful").correct(view, gates)
    # the labels say faithful (higher = better): on the metric's scale, 1 - the estimate
    assert corrected.interval == pytest.approx((1 - direct().high, 1 - direct().low))
    assert corrected.record["orientation"] == "1 - score (lower is better)"
    assert corrected.line.startswith(
        f"hallucination_rate corrected by 30 labels: {1 - direct().mean:.3f}"
    )
    upper = 1 - direct().low
    assert upper > 0.7 > 1 - direct().mean  # the corrected mean meets the cap, its upper end not
    assert gates.missed({}, {"hallucination_rate": corrected.interval}, "corrected interval") == [
        f"hallucination_rate: the corrected interval's upper end {upper:.4f} > 0.7"
    ]


def test_processes_write_the_same_correction(tmp_path, data, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    labels = labels_file(tmp_path / "labels.jsonl")
    flags = ("--labels", labels, "--label", "faithful", "--gate", "faithfulness>=0.7")
    one = run(*eval_command(data, fake_llm_server, tmp_path / "one"), *flags)
    two = run(*eval_command(data, fake_llm_server, tmp_path / "two"), *flags, "--processes", "2")
    assert one.returncode == two.returncode == 1, two.stderr
    summaries = [json.loads((tmp_path / f"{n}/summary.json").read_text()) for n in ("one", "two")]
    assert summaries[0]["label_corrected"] == summaries[1]["label_corrected"]
    assert summaries[0]["thresholds"] == summaries[1]["thresholds"]
    assert summaries[1]["label_corrected"]["n_labelled"] == 30


def test_merge_corrects_the_joined_run_as_a_plain_run_is(tmp_path, data, fake_llm_server):
    """judge eval --shard refuses --labels (a shard is part of the run): judge merge takes
    them and writes the correction and the verdict of the unsharded run."""
    fake_llm_server.chat = heuristic_judge
    labels = labels_file(tmp_path / "labels.jsonl")
    flags = ("--labels", labels, "--label", "faithful", "--gate", "faithfulness>=0.7")
    plain = run(*eval_command(data, fake_llm_server, tmp_path / "plain"), *flags)
    assert plain.returncode == 1, plain.stderr  # the judge meets 0.7, the labels do not
    shards = []
    for i in (1, 2):
        shard = tmp_path / f"shard{i}"
        done = run(*eval_command(data, fake_llm_server, shard), "--shard", f"{i}/2")
        assert done.returncode == 0, done.stderr
        shards.append(shard)
    merged = run("merge", tmp_path / "merged", *shards, *flags, "--no-record")
    assert merged.returncode == 1, merged.stderr
    summaries = [
        json.loads((tmp_path / f"{n}/summary.json").read_text()) for n in ("plain", "merged")
    ]
    assert summaries[1]["label_corrected"] == summaries[0]["label_corrected"]
    assert summaries[1]["thresholds"] == summaries[0]["thresholds"]
    assert summaries[1]["label_corrected"]["n_labelled"] == 30
    line = next(x for x in plain.stdout.splitlines() if x.startswith("faithfulness corrected"))
    assert line in merged.stdout
    assert f"<p class=corrected>{line}</p>" in (tmp_path / "merged/report.html").read_text()
    # a labels file that cannot be used fails before the join: nothing is written
    bad = run("merge", tmp_path / "bad", *shards, "--labels", labels, "--no-record")
    assert bad.returncode == 2 and "name the labels' column with --label COLUMN" in bad.stderr
    assert not (tmp_path / "bad" / "summary.json").exists()


def questioned_run(folder: Path, order: list[int], ids: list[str] | None = None) -> Path:
    """A results.jsonl of the rows `order` of SCORES (question i and, for row i, id `ids[i]`,
    else ri) in that order: every question its own, so `judge compare` itself pairs repeated
    ids by question."""
    folder.mkdir(exist_ok=True)
    ids = ids or [f"r{i}" for i in range(len(SCORES))]
    rows = [
        ResultRow(row=n, id=ids[i], question=f"question {i}", scores={"faithfulness": SCORES[i]})
        for n, i in enumerate(order)
    ]
    (folder / "results.jsonl").write_text("".join(r.json_line() + "\n" for r in rows))
    return folder / "results.jsonl"


def test_compare_refuses_a_labelled_difference_over_ids_that_name_several_rows(tmp_path):
    """Rows 2 and 3 of both runs had the id 'dup', unlabelled, B's in the other order: the
    corrected difference paired A's first 'dup' with B's first, left the others out (59
    pairs of 60 rows) and gave the judge-only difference of two runs of the same rows as
    0.0056, where it is 0. It now refuses, in A's and in B's words."""
    from judge.labels.estimate import estimate_difference

    ids = [f"r{i}" for i in range(len(SCORES))]
    ids[2] = ids[3] = "dup"
    assert SCORES[2] != SCORES[3]
    in_order = list(range(len(SCORES)))
    a = questioned_run(tmp_path / "a", in_order, ids)
    b = questioned_run(tmp_path / "b", [0, 1, 3, 2, *in_order[4:]], ids)  # A's 2 and 3 swapped
    labelled = [{"id": f"r{i}", "faithful": PEOPLE[i], "sample": SAMPLE} for i in CHOSEN]
    labelled = [r for r in labelled if r["id"] != "r3"]  # no label of 'dup' (rows 2 and 3)
    labels = write_jsonl(tmp_path / "labels.jsonl", labelled)
    flags = ["--labels-a", labels, "--labels-b", labels, "--label", "faithful"]
    done = run("compare", a, b, *flags, "--format", "json")
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert f"A ({a}): id 'dup' names rows 2 and 3: the label-corrected difference" in done.stderr
    assert "give each sample its own id" in done.stderr
    # the judge's own comparison pairs them by question: only the labelled part is refused
    plain = run("compare", a, b, "--format", "json")
    assert plain.returncode == 0 and json.loads(plain.stdout)["metrics"]["faithfulness"]["n"] == 60
    # in B alone, and from Python
    unique = questioned_run(tmp_path / "c", in_order)
    with pytest.raises(InputFormatError, match=r"B \(.*\): id 'dup' names rows 2 and 3"):
        estimate_difference(unique, b, labels_a=labelled, labels_b=labelled, label="faithful")
    # the same rows in another order pair by id: a difference of exactly 0 over every row
    backwards = questioned_run(tmp_path / "d", in_order[::-1])
    same = estimate_difference(
        unique, backwards, labels_a=labelled, labels_b=labelled, label="faithful"
    )
    assert same.rows == len(SCORES) and same.ppi.judge_only.mean == 0.0
    assert (same.ppi.n_labelled, same.ppi.n_unlabelled) == (29, 31)
