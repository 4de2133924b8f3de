"""An annotation session without the page: the seeded draw, the labels file fixing it for
every annotator, resuming at the first row not done, and the export for judge agreement."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from judge.annotate import Annotation, Choice
from judge.annotate.labels_file import read_labels_file
from judge.annotate.sample import draw
from judge.errors import InputFormatError, JudgeError
from judge.run.folder import RunFolder
from tests.helpers.annotate import CLAIMS, HOSTILE_ID, judged_run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judged_run(tmp_path_factory.mktemp("annotate") / "run")


def rows_of(run: Path) -> list:
    return [row for _, _, row in RunFolder.of(run).rows()]


def test_the_draw_is_a_seeded_shuffle_whose_first_rows_are_the_sample(run: Path) -> None:
    rows = rows_of(run)
    whole = draw(rows, "faithfulness", order="random", seed=7, sample=None)
    five = draw(rows, "faithfulness", order="random", seed=7, sample=5)
    assert whole.of == len(rows) == 11 and sorted(whole.rows) == list(range(11))
    assert five.rows == whole.rows[:5]  # a sample of five is the first five of the order
    assert five.sampled() == "random seed=7 n=5 of 11" and five.random
    expected = list(range(11))
    random.Random(7).shuffle(expected)
    assert whole.rows == expected
    assert draw(rows, "faithfulness", order="random", seed=8, sample=None).rows != whole.rows


def test_disagreements_first_puts_the_scores_nearest_half_first_and_says_not_random(
    run: Path, tmp_path: Path
) -> None:
    rows = rows_of(run)
    found = draw(rows, "faithfulness", order="disagreements", seed=0, sample=4)
    distance = [abs(row.scores["faithfulness"] - 0.5) for row in rows]
    chosen = [distance[i] for i in found.rows]
    assert chosen == sorted(chosen) and chosen[0] == 0  # (1, 1) and (2, 2) claims: 0.5
    assert max(chosen) <= min(d for i, d in enumerate(distance) if i not in found.rows)
    assert not found.random and "not random" in found.sampled()
    session = Annotation(
        run, tmp_path / "l.jsonl", annotator="ana", choice=Choice(order="disagreements")
    )
    session.open()
    session.record(0, label=1, claims=[])
    session.close()
    (record,) = read_labels_file(tmp_path / "l.jsonl").labels
    assert record["sample"] == {"method": "disagreements", "seed": 0, "n": 11, "of": 11}


def test_a_metric_the_run_lacks_is_refused_with_the_runs_metrics(run: Path) -> None:
    with pytest.raises(InputFormatError, match="context_precision, faithfulness"):
        draw(rows_of(run), "answer_relevancy", order="random", seed=0, sample=None)


def test_labelling_resumes_at_the_first_row_not_done(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    ana = Annotation(run, labels, annotator="ana", choice=Choice(sample=6, seed=3))
    ana.open()
    assert ana.state()["start"] == 0
    assert ana.record(0, label=1, claims=[])["next"] == 1
    assert ana.record(1, label=None, claims=[])["next"] == 2  # skipped
    ana.close()
    again = Annotation(run, labels, annotator="ana")  # the file fixes the draw
    assert again.draw.rows == ana.draw.rows and again.draw.sample == 6
    state = again.state()
    assert state["start"] == 2 and state["labelled"] == 1 and state["skipped"] == 1
    assert again.row(1)["mine"] == {"label": None, "claims": [], "skipped": True}
    assert again.row(0)["mine"] == {"label": 1, "claims": [], "skipped": False}
    assert Annotation(run, labels, annotator="bob").state()["start"] == 0


def test_a_second_draw_on_a_begun_file_is_refused(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    first = Annotation(run, labels, annotator="ana", choice=Choice(seed=3))
    first.open()
    first.close()
    # Nothing labelled yet: the draw is not fixed.
    assert Annotation(run, labels, annotator="bob", choice=Choice(seed=4)).draw.seed == 4
    first.open()
    first.record(0, label=1, claims=[])
    first.close()
    with pytest.raises(InputFormatError, match="begun with --seed 3"):
        Annotation(run, labels, annotator="bob", choice=Choice(seed=4))
    with pytest.raises(InputFormatError, match="begun with --order random"):
        Annotation(run, labels, annotator="bob", choice=Choice(order="disagreements"))


def test_the_export_says_when_its_rows_do_not_lead_the_draw(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    ana = Annotation(run, labels, annotator="ana", choice=Choice(seed=5))
    ana.open()
    for position, value in enumerate([1, 0, 1]):
        ana.record(position, label=value, claims=[])
    rows, note = ana.export()
    assert [r["label"] for r in rows] == [1, 0, 1] and note == ""
    sample = {"method": "random", "seed": 5, "n": 11, "of": 11}
    assert all(r["sample"] == sample for r in rows)
    drawn = rows_of(run)
    assert [r["id"] for r in rows] == [drawn[i].id for i in ana.draw.rows[:3]]
    first = drawn[ana.draw.rows[0]]
    assert rows[0]["question"] == first.question and rows[0]["contexts"] == first.contexts
    ana.record(4, label=0, claims=[])  # position 3 passed over
    rows, note = ana.export()
    assert len(rows) == 4 and "not the first 4 of the draw" in note
    ana.close()


def test_the_export_of_several_annotators_takes_the_majority(run: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    votes = {"ana": [1, 1, 0], "bob": [1, 0, 0], "cy": [0, 0, 0]}
    for name, given in votes.items():
        session = Annotation(run, labels, annotator=name)
        session.open()
        for position, value in enumerate(given):
            session.record(position, label=value, claims=[])
        session.close()
    session = Annotation(run, labels, annotator="ana")
    rows, _ = session.export()
    assert [r["label"] for r in rows] == [1, 0, 0]
    assert rows[0]["labels"] == {"ana": 1, "bob": 1, "cy": 0}
    assert [r["label"] for r in session.export("bob")[0]] == [1, 0, 0]
    agreement = session.agreement()
    assert agreement.measure == "fleiss_kappa" and agreement.rows == 3
    with pytest.raises(InputFormatError, match="no label by 'dan'"):
        session.export("dan")
    two = Annotation(run, labels, annotator="ana")
    two.log.labels = [r for r in two.log.labels if r["annotator"] != "cy"]
    rows, note = two.export()
    assert [r["label"] for r in rows] == [1, 0] and "1 rows left out" in note
    assert "not the first" not in note  # a tie is no hole in the sample


def test_a_row_shows_its_claims_with_verdicts_and_its_contexts_with_grades(run: Path) -> None:
    session = Annotation(run, run.parent / "labels.jsonl", annotator="ana")
    position = session.draw.rows.index(1)  # r1: one supported claim, one not
    shown = session.row(position)
    assert shown["id"] == "r1" and shown["score"] == 0.5 and CLAIMS[1] == (1, 1)
    assert [c["supported"] for c in shown["claims"]] == [True, False]
    assert shown["claims"][0]["context"] == 1 and shown["claims"][0]["reason"]
    assert [c["grade"] is not None for c in shown["contexts"]] == [True, True, True]
    hostile = session.row(session.draw.rows.index(10))
    assert hostile["id"] == HOSTILE_ID


def test_the_labels_of_a_session_are_read_by_judge_estimate(run: Path, tmp_path: Path) -> None:
    """The annotation page's file is `judge estimate`'s input as it is: a random draw's
    labels give a PPI estimate without warnings; disagreements first are said not random,
    and refused when a random sample is required."""
    from judge.labels.estimate import estimate

    labels = tmp_path / "labels.jsonl"
    ana = Annotation(run, labels, annotator="ana", choice=Choice(sample=6, seed=3))
    ana.open()
    for place in range(6):
        ana.record(place, label=place % 2, claims=[])
    ana.close()
    found = estimate(run, labels=labels, label="label", metric="faithfulness")
    assert found.random and found.warnings == []
    assert found.ppi.n_labelled == 6 and found.rows == 11
    assert found.samples == {'{"method": "random", "n": 6, "of": 11, "seed": 3}': 6}

    first = tmp_path / "disagreements.jsonl"
    bob = Annotation(run, first, annotator="bob", choice=Choice(order="disagreements"))
    bob.open()
    bob.record(0, label=1, claims=[])
    bob.record(1, label=0, claims=[])
    bob.close()
    doubtful = estimate(run, labels=first, label="label", metric="faithfulness")
    assert not doubtful.random and any("random" in w for w in doubtful.warnings)
    with pytest.raises(JudgeError, match="no random sample"):
        estimate(run, labels=first, label="label", metric="faithfulness", require_random=True)
