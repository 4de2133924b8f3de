"""The probes' perturbations and checks: pure functions, no model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.probes import checks, perturb

EN = "Python was created by Guido van Rossum. Pi is about 3.14! Is that so?"
ZH = "巴黎是法国的首都。水在100度沸腾！对吗？"


def test_sentences_split_at_end_marks_not_inside_numbers():
    assert perturb.sentences(EN) == [
        "Python was created by Guido van Rossum.",
        "Pi is about 3.14!",
        "Is that so?",
    ]
    assert perturb.sentences(ZH) == ["巴黎是法国的首都。", "水在100度沸腾！", "对吗？"]
    assert perturb.sentences("  \n ") == []


def test_joined_keeps_every_claim_in_one_sentence():
    assert (
        perturb.joined(EN)
        == "Python was created by Guido van Rossum; Pi is about 3.14; Is that so?"
    )
    assert perturb.joined(ZH) == "巴黎是法国的首都；水在100度沸腾；对吗？"
    assert perturb.joined("One sentence only.") == "One sentence only."
    assert perturb.sentences(perturb.joined(EN)) == [perturb.joined(EN)]


def test_one_per_line_puts_each_sentence_on_a_line():
    assert perturb.one_per_line(EN).split("\n") == perturb.sentences(EN)
    assert perturb.one_per_line(ZH) == "巴黎是法国的首都。\n水在100度沸腾！\n对吗？"


def test_padding_uses_the_answers_language_and_keeps_the_answer():
    assert perturb.language(EN) == "en" and perturb.language(ZH) == "zh"
    assert perturb.language("BM25 是什么？它是一种排序函数。") == "zh"  # mostly Chinese
    assert perturb.pad(EN) == EN + " " + perturb.FILLER["en"]
    assert perturb.pad(ZH) == ZH + perturb.FILLER["zh"]
    assert perturb.FILLER["en"].startswith("To summarise, as noted above")
    assert perturb.FILLER["zh"].startswith("总之，如上所述")


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_permutations_are_seeded_and_never_the_identity(n):
    for row in range(50):
        order = perturb.permutation(n, 0, row)
        assert sorted(order) == list(range(n)) and order != list(range(n))
        assert perturb.permutation(n, 0, row) == order  # seeded
    if n > 2:  # two contexts have one other order only
        assert any(perturb.permutation(n, 1, r) != perturb.permutation(n, 0, r) for r in range(50))
    assert perturb.permutation(1, 0, 0) == [0] and perturb.permutation(0, 0, 0) == []
    assert perturb.reorder(["a", "b", "c"], [2, 0, 1]) == ["c", "a", "b"]


def test_repeat_check_counts_spread_and_crossings():
    runs = np.array([[1.0, 0.5, 0.2, math.nan], [1.0, 0.4, 0.2, 1.0], [1.0, 0.6, 0.2, 1.0]])
    check = checks.repeat("faithfulness", runs, 0.5)
    assert check.rows == 3  # the row with a NaN repeat is left out
    assert check.figures["crossing_share"] == pytest.approx(1 / 3)  # 0.4 vs 0.5, 0.6
    assert check.figures["max_std"] == pytest.approx(np.std([0.5, 0.4, 0.6]))
    assert check.held is False  # a third of the rows cross: over 0.10
    steady = checks.repeat("faithfulness", np.tile([1.0, 0.2, 0.3, 0.9, 0.6], (2, 1)), 0.5)
    assert steady.held is True and steady.figures["mean_std"] == 0.0
    none = checks.repeat("faithfulness", np.full((2, 2), math.nan), 0.5)
    assert none.held is None and none.rows == 0 and "no row" in (none.note or "")


def test_unchanged_and_no_gain_checks_use_the_documented_tolerances():
    before = np.array([1.0, 0.5, 0.0, 0.3, 0.7, math.nan])
    after = np.array([1.0, 0.5, 0.1, 0.3, 0.7, 1.0])
    moved = checks.unchanged("order", "faithfulness", before, after, "x")
    assert moved.rows == 5 and moved.figures["mean_abs_change"] == pytest.approx(0.1 / 5)
    assert moved.held is True  # 0.02 <= order tolerance 0.05
    assert "mean_abs_change <= 0.05" in moved.expectation
    far = checks.unchanged("granularity:joined", "faithfulness", before, before * 0, "y")
    assert far.held is False and far.figures["rows_moved"] == 4
    gained = checks.no_gain("faithfulness", before, np.array([1.0, 0.75, 0.0, 0.3, 0.7, 0.0]))
    assert gained.figures["mean_gain"] == pytest.approx(0.25 / 5) and gained.held is False
    lost = checks.no_gain("faithfulness", before, np.array([0.8, 0.4, 0.0, 0.3, 0.7, 0.0]))
    assert lost.held is True and lost.figures["rows_losing"] == 2


def test_models_check_reuses_the_label_measures():
    first = np.array([1.0, 0.9, 0.6, 0.3, 0.1, 0.0])
    agree = checks.models("faithfulness", first, first * 0.9, 0.5)
    assert agree.figures["spearman"] == pytest.approx(1.0) and agree.held is True
    assert agree.figures["kappa"] == pytest.approx(1.0)  # 0.6*0.9 = 0.54 still passes
    flipped = checks.models("faithfulness", first, 1 - first, 0.5)
    assert flipped.figures["spearman"] == pytest.approx(-1.0) and flipped.held is False
    assert flipped.figures["kappa"] < 0
    constant = checks.models("faithfulness", first, np.ones(6), 0.5)
    assert math.isnan(constant.figures["spearman"]) and constant.held is False
    assert "spearman undefined: one model gave every row the same score" in constant.note
    assert constant.figures["kappa"] == 0.0  # agreement no better than chance: defined
    both = checks.models("faithfulness", np.ones(3), np.ones(3), 0.5)
    assert "kappa undefined: one model passed (or failed) every row at 0.5" in both.note
    assert both.held is None and both.rows == 3  # nothing to tell: neither measure defined


def test_a_check_on_too_few_rows_cannot_tell():
    """The audit's case: repeat and order held on one comparable row, with no note. Below
    MIN_ROWS (5) rows a check whose bar was met says it could not tell (held None), with
    the count: none of n rows moving is what a judge that moves half the rows shows with
    probability 0.5^n, 1/16 at 4 rows, 1/32 at 5 (one-sided 95%: below 0.05 from 5)."""
    one = checks.repeat("faithfulness", np.array([[1.0, math.nan], [1.0, 0.3], [1.0, 0.2]]), 0.5)
    assert one.rows == 1 and one.held is None
    assert one.note == "1 row compared, fewer than 5: too few to tell"
    before = np.array([1.0, 0.5, 0.0, 0.2, math.nan, math.nan])
    order = checks.unchanged("order", "faithfulness", before, before.copy(), "x")
    assert order.rows == 4 and order.held is None
    assert order.note == "4 rows compared, fewer than 5: too few to tell"
    gain = checks.no_gain("faithfulness", before, before.copy())
    assert gain.held is None and "too few to tell" in (gain.note or "")
    agree = checks.models("faithfulness", before[:4], before[:4], 0.5)
    assert agree.held is None and "4 rows compared, fewer than 5" in (agree.note or "")
    # five rows are enough; a bar broken on fewer still fails (with the count noted)
    five = np.array([1.0, 0.5, 0.0, 0.2, 0.7])
    assert checks.unchanged("order", "faithfulness", five, five.copy(), "x").held is True
    broken = checks.unchanged("order", "faithfulness", before, before + 0.5, "x")
    assert broken.held is False and "fewer than 5" in (broken.note or "")
    assert checks.MIN_ROWS == 5 and 0.5**5 < 0.05 <= 0.5**4


def test_a_probe_table_counts_a_check_on_too_few_rows_as_n_a():
    from judge.probes.result import ProbeResult

    check = checks.repeat("faithfulness", np.array([[0.9], [0.9], [0.9]]), 0.5)
    table = ProbeResult([check], {}, {}).table()
    assert "repeat              faithfulness           1  n/a" in table
    assert "(1 row compared, fewer than 5: too few to tell)" in table
    assert "0 of 1 checks held, 0 failed" in table
