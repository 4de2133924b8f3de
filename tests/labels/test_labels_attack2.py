"""More attacks on `judge eval --labels`, `judge merge --labels` and compare.html's corrected
difference (issue 42): what a careless or hostile user gives them."""

from __future__ import annotations

import json

import pytest

from judge.testing import heuristic_judge
from tests.helpers.cli import run
from tests.helpers.corrected_runs import (
    CHOSEN,
    PEOPLE,
    SAMPLE,
    data_file,
    eval_command,
    write_jsonl,
)


@pytest.mark.parametrize(
    "extra",
    [(), ("--processes", "2"), ("--ray",), ("--dry-run",)],
    ids=["one process", "processes", "ray", "dry"],
)
def test_one_labelled_row_of_the_input_is_refused_before_any_request(
    tmp_path, fake_llm_server, extra
):
    """One label of a row of the input (the others of no row) passed the check before the
    run, and the run, judged whole, then failed at its end for want of a second labelled
    row (exit 2, no results.jsonl)."""
    fake_llm_server.chat = heuristic_judge
    data = data_file(tmp_path)
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": ident, "faithful": 1, "sample": SAMPLE} for ident in ("r3", "x1", "x2")],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out", *extra),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert "1 labelled row is a row of" in done.stderr
    assert "at least 2" in done.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()


def test_compare_fails_when_every_labelled_row_says_b_is_worse(tmp_path):
    """People call A faithful and B not on each of 30 labelled rows; the judge calls B
    better. Every labelled difference is -1, so the normal interval had zero width and
    none was given: no verdict by the labels, and --fail-on-regression passed (exit 0)."""
    from tests.helpers.corrected_runs import PEOPLE, SCORES, labels_file, write_run

    a = write_run(tmp_path / "a", SCORES)
    b = write_run(tmp_path / "b", [1.0] * len(SCORES))
    labels_a = labels_file(tmp_path / "a.jsonl", [1] * len(PEOPLE))
    labels_b = labels_file(tmp_path / "b.jsonl", [0] * len(PEOPLE))
    args = ["compare", a, b, "--labels-a", labels_a, "--labels-b", labels_b, "--label", "faithful"]
    done = run(*args, "--fail-on-regression")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "REGRESSION: faithfulness got worse by the labels" in done.stderr


def test_a_difference_of_binary_labels_all_one_way_has_the_exact_interval():
    """n differences all -1 (0/1 labels, B's 0 and A's 1 on every labelled row): B's share
    of rows worse is at least (alpha/2)^(1/n) (Clopper-Pearson), so the mean difference is
    at most 1 - 2 (alpha/2)^(1/n); all +1 is the mirror image."""
    import math

    from judge.stats import ppi_mean_difference

    n = 30
    end = 0.025 ** (1 / n)
    for a, b in ((1.0, 0.0), (0.0, 1.0)):
        got = ppi_mean_difference(
            judged_a=[0.5] * 10,
            judged_b=[0.9] * 10,
            judged_labelled_a=[0.5] * n,
            judged_labelled_b=[0.9] * n,
            labels_a=[a] * n,
            labels_b=[b] * n,
        )
        expected = (-1.0, 1 - 2 * end) if b < a else (2 * end - 1, 1.0)
        assert (got.low, got.high) == pytest.approx(expected, abs=1e-12)
        assert got.mean == b - a and math.isfinite(got.labels_only.high)


def test_compare_html_keeps_hostile_names_of_the_corrected_difference_escaped(tmp_path):
    """The corrected difference's section names the metric, the label column, the ids of
    its warnings and the labels' sample: each is the user's text, and must stay text."""
    from tests.helpers.corrected_runs import CHOSEN, PEOPLE, SCORES, write_run

    metric = "<img src=x onerror=alert(1)>"
    ids = [f"<i>{i}" for i in range(len(SCORES))]
    a = write_run(tmp_path / "a", SCORES, metric=metric, ids=ids)
    b = write_run(tmp_path / "b", [1.0] * len(SCORES), metric=metric, ids=ids)
    column = "<script>x()</script>"
    labels_a = write_jsonl(
        tmp_path / "a.jsonl",
        [{"id": ids[i], column: PEOPLE[i], "sample": SAMPLE} for i in CHOSEN]
        + [{"id": "<b>unknown</b>", column: 1, "sample": SAMPLE}],
    )
    labels_b = write_jsonl(
        tmp_path / "b.jsonl",
        [{"id": ids[i], column: 0, "sample": {"method": "<u>manual</u>"}} for i in CHOSEN],
    )
    flags = ["--labels-a", labels_a, "--labels-b", labels_b, "--label", column]
    done = run("compare", a, b, *flags, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "out" / "compare.html").read_text(encoding="utf-8")
    section = page[page.index("<h2>Corrected by people's labels</h2>") :]
    section = section[: section.index("<h2>", 5)]
    for raw in ("<img", "<script", "<i>", "<b>", "<u>"):
        assert raw not in section, raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in section
    assert "&lt;b&gt;unknown&lt;/b&gt;" in section  # the warning of an id of no row
    assert "&lt;u&gt;manual&lt;/u&gt;" in section  # the warning of no random sample


def conversations(path, n=4):
    """n conversations of 3 turns; the assistant's turns are the rows, ids c0#2, c0#4, ..."""
    records = []
    for c in range(n):
        turns = []
        for t in range(3):
            turns += [
                {"role": "user", "content": f"question {c} {t}"},
                {
                    "role": "assistant",
                    "content": "Python was created by Guido van Rossum.",
                    "contexts": ["Python was created by Guido van Rossum."],
                },
            ]
        records.append({"id": f"c{c}", "turns": turns})
    return write_jsonl(path, records)


@pytest.mark.parametrize(
    ("ids", "rows_said"),
    [
        # labels of whole conversations, where the rows are their turns
        ([f"c{c}" for c in range(4)], "'c0#2', 'c0#4', 'c0#6'"),
        # ids written as floats (a spreadsheet's export) of rows numbered 0, 1, ...
        ([float(i) for i in range(4)], "'0', '1', '2'"),
    ],
    ids=["conversation ids", "float ids"],
)
def test_labels_of_no_row_are_told_what_the_rows_ids_look_like(
    tmp_path, fake_llm_server, ids, rows_said
):
    """'no labelled id is a row ... are the labels of another run?' named the labels' ids
    only: a user who labelled conversations (the rows are their turns, CONV#TURN) or whose
    spreadsheet wrote 3 as 3.0 could not see why they match no row."""
    fake_llm_server.chat = heuristic_judge
    if isinstance(ids[0], str):
        data = conversations(tmp_path / "chats.jsonl")
    else:
        data = data_file(tmp_path)
        records = [json.loads(line) for line in data.read_text().splitlines()]
        write_jsonl(data, [{k: v for k, v in r.items() if k != "id"} for r in records])
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": ident, "faithful": 1, "sample": SAMPLE} for ident in ids],
    )
    done = run(
        *eval_command(data, fake_llm_server, tmp_path / "out"),
        "--labels",
        labels,
        "--label",
        "faithful",
    )
    assert done.returncode == 2 and fake_llm_server.requests == [], done.stderr
    assert f"the rows' ids are like {rows_said}" in done.stderr


def test_labels_that_fail_once_the_rows_are_judged_say_the_rows_are_kept(tmp_path, fake_llm_server):
    """The two labelled rows have no answer, so the judge scores neither: that is known
    only once the run is judged, and the run ended with exit 2, no results.jsonl and
    nothing said of the judged rows, which its checkpoint keeps (the same command again
    judges nothing)."""
    fake_llm_server.chat = heuristic_judge
    data = data_file(tmp_path)
    records = [json.loads(line) for line in data.read_text().splitlines()]
    for i in (1, 2):
        records[i]["answer"] = ""
    write_jsonl(data, records)
    labels = write_jsonl(
        tmp_path / "labels.jsonl",
        [{"id": f"r{i}", "faithful": 1, "sample": SAMPLE} for i in (1, 2)],
    )
    command = [*eval_command(data, fake_llm_server, tmp_path / "out"), "--no-cache"]
    command.remove("--cache")
    command.remove(tmp_path / "cache.sqlite")
    done = run(*command, "--labels", labels, "--label", "faithful")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "0 labelled rows with a judged score" in done.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()
    assert "the judged rows are kept" in done.stderr, done.stderr
    assert "without --labels" in done.stderr
    asked = len(fake_llm_server.requests)
    again = run(*command)
    assert again.returncode == 0, again.stderr
    assert len(fake_llm_server.requests) == asked  # the checkpoint's rows: nothing asked


def test_labels_read_the_wrong_way_round_are_warned_about(tmp_path):
    """People asked 'did the answer hallucinate?' wrote 1 for yes, where labels are read
    higher = better (1 = no hallucination). The judge agrees with them row for row, yet the
    corrected hallucination_rate came out as 1 minus theirs (0.733 [0.575, 0.892], where
    the labelled rows' rate is 0.267) with nothing said but a note that lambda is 0."""
    from judge.labels.estimate import estimate
    from tests.helpers.corrected_runs import write_run

    n = 60
    scores = [1.0 if i % 8 == 0 else 0.0 for i in range(n)]  # the judge: 1 in 8 hallucinate
    run_folder = write_run(tmp_path / "run", scores, metric="hallucination_rate").parent
    sample = {"method": "random", "seed": 1, "of": n}
    labels = [{"id": f"r{i}", "bad": int(scores[i]), "sample": sample} for i in range(0, n, 2)]
    got = estimate(run_folder, labels=labels, label="bad", metric="hallucination_rate")
    said = " ".join(got.warnings)
    assert "the labels fall as the judge's scores rise" in said, got.warnings
    assert "1 = good" in said
    # labels the right way round (1 = no hallucination) are not warned about
    right = [{**record, "bad": 1 - record["bad"]} for record in labels]
    fine = estimate(run_folder, labels=right, label="bad", metric="hallucination_rate")
    assert not any("fall as" in w for w in fine.warnings), fine.warnings


def test_require_random_counts_the_labels_of_the_runs_rows_only(tmp_path, fake_llm_server):
    """A label of another run's row, drawn by hand, is left out of the estimate; judge eval
    --require-random refused the whole file for it ('1 of 31 labelled rows record no random
    sample'), where judge estimate --require-random on the same run took the labels."""
    fake_llm_server.chat = heuristic_judge
    data = data_file(tmp_path)
    records = [
        {"id": f"r{i}", "faithful": PEOPLE[i], "sample": SAMPLE, "metric": "faithfulness"}
        for i in CHOSEN
    ]
    records.append({"id": "elsewhere", "faithful": 1, "sample": {"method": "manual"}})
    labels = write_jsonl(tmp_path / "labels.jsonl", records)
    flags = ["--labels", labels, "--label", "faithful", "--require-random"]
    done = run(*eval_command(data, fake_llm_server, tmp_path / "out"), *flags)
    assert done.returncode == 0, done.stderr
    assert "1 labelled ids are no row of the run, left out: 'elsewhere'" in done.stderr
    estimated = run(
        "estimate", tmp_path / "out", *flags, "--metric", "faithfulness", "--format", "json"
    )
    assert estimated.returncode == 0, estimated.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["label_corrected"]["ppi"] == json.loads(estimated.stdout)["ppi"]


def test_a_labels_file_of_one_json_document_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Windows editors save UTF-8 with a byte order mark: a .jsonl or .csv labels file with
    one was read, a .json one refused ('Unexpected UTF-8 BOM')."""
    from judge.labels.estimate import read_label_file

    records = [{"id": "r1", "ok": 1}, {"id": "r2", "ok": 0}]
    path = tmp_path / "labels.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(records).encode())
    assert read_label_file(path, label="ok").labels == {"r1": 1.0, "r2": 0.0}


def test_a_gate_held_to_graded_labels_off_the_metrics_scale_is_warned_about(tmp_path):
    """A run gated faithfulness>=0.8 given 1-5 grades: the corrected mean is on the grades'
    scale (2.8), so the gate, written for scores on [0, 1], passes whatever people said,
    and nothing said so."""
    import judge
    from judge.labels.estimate import Labels
    from judge.run.rows import ResultRow
    from tests.helpers.corrected_runs import SCORES

    rows = [ResultRow(row=i, id=f"r{i}", scores={"faithfulness": s}) for i, s in enumerate(SCORES)]
    view = type("View", (), {})()
    view.rows, view.summary = rows, {}
    view.config = type("Config", (), {"source": "data.jsonl", "lower_is_better": []})()
    grades = [
        {"id": f"r{i}", "grade": 1 + (i % 5), "sample": SAMPLE, "metric": "faithfulness"}
        for i in CHOSEN
    ]
    gated = Labels(grades, label="grade").correct(view, judge.Gates.of(["faithfulness>=0.8"]))
    said = " ".join(gated.warnings)
    assert "the labels run from 1 to 5" in said and "faithfulness>=0.8" in said, said
    # without a gate on it, or with labels on [0, 1], there is nothing to say
    plain = Labels(grades, label="grade").correct(view, judge.Gates())
    assert not any("run from" in w for w in plain.warnings)
    binary = [{**g, "grade": int(g["grade"] > 3)} for g in grades]
    fine = Labels(binary, label="grade").correct(view, judge.Gates.of(["faithfulness>=0.8"]))
    assert not any("run from" in w for w in fine.warnings)


def test_compare_warns_of_labels_read_the_wrong_way_round(tmp_path):
    """judge compare's corrected difference: labels written 1 = bad for both runs fall as
    the judge's differences rise, and the difference came out the opposite of theirs
    with nothing said (as one run's mean did)."""
    from judge.labels.estimate import estimate_difference
    from tests.helpers.corrected_runs import write_run

    n = 60
    a_scores = [0.0] * n
    b_scores = [1.0 if i % 3 else 0.0 for i in range(n)]  # B hallucinates on 2 rows in 3
    a = write_run(tmp_path / "a", a_scores, metric="hallucination_rate")
    b = write_run(tmp_path / "b", b_scores, metric="hallucination_rate")
    sample = {"method": "random", "seed": 1, "of": n}

    def labels(scores):  # 1 = 'it hallucinated', as the judge says
        return [{"id": f"r{i}", "bad": int(scores[i]), "sample": sample} for i in range(0, n, 2)]

    got = estimate_difference(
        a, b, labels_a=labels(a_scores), labels_b=labels(b_scores), label="bad"
    )
    assert any("the labels fall as the judge's scores rise" in w for w in got.warnings), (
        got.warnings
    )
