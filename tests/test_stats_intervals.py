"""judge.stats' bootstrap intervals with few units: Hesterberg's expanded percentile interval
(the plain percentile interval covered 83% at n = 5 for a "95%" interval), the t quantile
it needs, and the one rule for one unit or units with no spread (no interval, or the exact
bound of values all at an end of a known range)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.errors import InputFormatError
from judge.stats import (
    bootstrap_ci,
    bootstrap_cis,
    cluster_bootstrap_cis,
    expanded_tail,
    interval_note,
    t_quantile,
)

# Upper quantiles of Student's t, P(T > t) = p, from scipy.stats.t.isf (scipy 1.17.1).
T_QUANTILES = [
    (0.025, 1, 12.706204736174705),
    (0.025, 2, 4.302652729749464),
    (0.025, 3, 3.1824463052837086),
    (0.025, 4, 2.7764451051977943),
    (0.025, 5, 2.5705818356363155),
    (0.025, 9, 2.2621571627982053),
    (0.025, 19, 2.09302405440831),
    (0.025, 29, 2.045229642132704),
    (0.025, 49, 2.0095752371292397),
    (0.025, 99, 1.9842169515864176),
    (0.025, 999, 1.9623414611334498),
    (0.025, 1000, 1.9623390808264085),
    (0.025, 9999, 1.9602012636213577),
    (0.025, 1000000, 1.9599663568141072),
    (0.005, 1, 63.65674116287158),
    (0.005, 2, 9.924843200918293),
    (0.005, 5, 4.032142983555229),
    (0.005, 29, 2.7563859036706053),
    (0.005, 999, 2.5807596372676365),
    (0.005, 1000, 2.580754698065951),
    (0.1, 1, 3.0776835371752536),
    (0.1, 3, 1.6377443536962089),
    (0.1, 99, 1.2901614420344851),
    (0.1, 1000000, 1.2815524121299389),
]


@pytest.mark.parametrize(("upper", "df", "known"), T_QUANTILES)
def test_t_quantile_matches_known_values(upper, df, known):
    assert t_quantile(upper, df) == pytest.approx(known, rel=1e-13)


def test_t_quantile_refuses_what_it_cannot_give():
    with pytest.raises(InputFormatError, match=r"upper= strictly between 0 and 0\.5"):
        t_quantile(0.5, 3)
    with pytest.raises(InputFormatError, match="df=0"):
        t_quantile(0.025, 0)


def test_expanded_tail_is_hesterbergs():
    # z_{alpha'/2} = sqrt(n / (n-1)) t_{alpha/2, n-1}: at n = 5, 1.118 * 2.776 = 3.104
    z = math.sqrt(5 / 4) * 2.7764451051977943
    assert expanded_tail(5) == pytest.approx(0.5 * math.erfc(z / math.sqrt(2)), rel=1e-11)
    tails = [expanded_tail(n) for n in (2, 3, 5, 10, 20, 50, 1000, 100_000)]
    assert tails == sorted(tails)  # wider with fewer units
    assert 0.0248 < expanded_tail(1000) < 0.025
    assert math.isnan(expanded_tail(1))


def test_expanded_interval_covers_near_95_percent_at_five_rows():
    # The plain percentile interval covered 0.83 here (audit s9); the expanded one ~0.95.
    rng = np.random.default_rng(7)
    truth, hits, reps = 0.5, 0, 400
    for _ in range(reps):
        low, high = bootstrap_ci(rng.beta(2, 2, 5))
        hits += low <= truth <= high
    assert hits / reps >= 0.90


def test_two_to_four_rows_give_their_range_and_say_it_covers_less():
    assert bootstrap_ci(np.array([0.2, 0.7])) == (0.2, 0.7)
    assert interval_note(np.array([0.2, 0.7, 0.4])) == (
        "only 3 rows: the interval cannot reach past their values, so it holds the true mean "
        "less often than 95% (about 75% for a symmetric spread of scores)"
    )
    assert interval_note(np.array([0.2, 0.7, 0.4, 0.5, 0.1])) is None


def test_expanded_cluster_interval_is_wider_with_few_conversations():
    values = np.array([0.1, 0.3, 0.5, 0.6, 0.9, 0.8, 0.2, 0.4, 0.7])
    clusters = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    ((low, high),) = cluster_bootstrap_cis([values], [clusters])
    sums = np.bincount(clusters, weights=values)
    # three conversations: the percentiles are taken at 6.8e-8, i.e. at the extremes
    assert (low, high) == pytest.approx((sums.min() / 3, sums.max() / 3), abs=1e-15)


def test_one_row_or_one_conversation_has_no_interval():
    low, high = bootstrap_ci(np.array([0.4]))
    assert math.isnan(low) and math.isnan(high)
    assert interval_note(np.array([0.4])) == (
        "one row: no interval (a bootstrap interval needs two rows or more)"
    )
    turns = np.linspace(0, 1, 50)
    low, high = bootstrap_ci(turns, clusters=np.zeros(50, dtype=np.int64))
    assert math.isnan(low) and math.isnan(high)
    assert interval_note(turns, clusters=np.zeros(50, dtype=np.int64)).startswith(
        "one conversation:"
    )


def test_values_all_at_an_end_of_a_known_range_get_the_exact_bound():
    end = ((1 - 0.95) / 2) ** (1 / 5)  # Clopper-Pearson's lower end of 5 in 5
    assert bootstrap_ci(np.ones(5), bounds=(0, 1)) == (end, 1.0)
    assert bootstrap_ci(np.zeros(5), bounds=(0, 1)) == (0.0, 1.0 - end)
    # paired differences in [-1, 1], all -1: the mean is at most 1 - 2 * (alpha/2)^(1/n)
    low, high = bootstrap_ci(np.full(30, -1.0), bounds=(-1, 1))
    assert (low, high) == (-1.0, 1.0 - 2 * ((1 - 0.95) / 2) ** (1 / 30))
    assert interval_note(np.ones(5), bounds=(0, 1)) == (
        "every value is 1: the interval is the exact bound for 5 rows all at the end of [0, 1] "
        "(a bootstrap interval would have zero width)"
    )


def test_values_all_equal_otherwise_have_no_interval():
    for values, bounds in [
        (np.ones(5), None),  # range not known
        (np.full(30, -0.1), (-1, 1)),  # not at an end
        (np.full(300, 0.9), (0, 1)),  # the mean of 0.9s is off in its last bit
        (np.zeros(4), (-1, 1)),  # all ties
    ]:
        low, high = bootstrap_ci(values, bounds=bounds)
        assert math.isnan(low) and math.isnan(high), values
        assert "no interval (with no spread among the" in interval_note(values, bounds=bounds)


def test_conversations_with_the_same_mean_have_no_interval():
    values = np.array([0.0, 1.0, 1.0, 0.0])
    clusters = np.array([0, 0, 1, 1])
    low, high = bootstrap_ci(values, clusters=clusters)
    assert math.isnan(low) and math.isnan(high)
    assert "2 conversations have the same mean, 0.5" in interval_note(values, clusters=clusters)


def test_the_rule_depends_only_on_the_values():
    rng = np.random.default_rng(3)
    columns = [rng.random(7), np.ones(7), np.array([0.3]), rng.random(12)]
    bounds = [(0.0, 1.0)] * 4
    together = bootstrap_cis(columns, bounds=bounds)
    alone = [bootstrap_ci(c, bounds=b) for c, b in zip(columns, bounds, strict=True)]
    assert repr(together) == repr(alone)
    assert repr(bootstrap_cis(columns, bounds=bounds)) == repr(together)


def test_a_run_summary_says_why_a_metric_has_no_interval():
    from judge.run.results import EvaluationResult
    from judge.run.rows import ResultRow

    rows = [
        ResultRow(row=i, id=f"r{i}", scores={"faithfulness": 1.0, "mine": 0.7, "context_recall": v})
        for i, v in enumerate([0.2, 0.9, 0.4])
    ]
    result = EvaluationResult(rows, ["faithfulness", "mine", "context_recall"], {}, {})
    s = result.summary
    assert (s["faithfulness"].ci_low, s["faithfulness"].ci_high) == (
        ((1 - 0.95) / 2) ** (1 / 3),
        1.0,
    )
    assert math.isnan(s["mine"].ci_low) and math.isnan(s["mine"].ci_high)  # scale not known
    # three rows: the expanded percentiles are the extremes of the resample means
    assert (s["context_recall"].ci_low, s["context_recall"].ci_high) == pytest.approx((0.2, 0.9))
    table = result.table()
    assert "mine: every value is 0.7: no interval (with no spread among the 3 rows" in table
    assert "faithfulness: every value is 1: the interval is the exact bound for 3 rows" in table
    assert "context_recall: only 3 rows: the interval cannot reach past their values" in table
    assert result.summary_dict()["metrics"]["mine"]["ci_low"] is None


def test_a_comparison_of_ties_has_no_interval_and_says_why():
    from judge.comparison.evaluations import compare_scores

    a = {f"q{i}": {"faithfulness": 0.5, "context_recall": 1.0} for i in range(6)}
    b = {f"q{i}": {"faithfulness": 0.5, "context_recall": 0.0} for i in range(6)}
    comparison = compare_scores(a, b)
    tied = comparison.metrics["faithfulness"]
    assert math.isnan(tied.ci_low) and math.isnan(tied.ci_high)
    lost = comparison.metrics["context_recall"]
    assert (lost.ci_low, lost.ci_high) == (-1.0, 1.0 - 2 * ((1 - 0.95) / 2) ** (1 / 6))
    table = comparison.table()
    assert (
        "faithfulness: every difference is 0: no interval (with no spread among the 6 pairs"
        in table
    )
    data = comparison.to_dict()["metrics"]
    assert data["faithfulness"]["ci_low"] is None
    assert data["faithfulness"]["interval_note"].startswith("every difference is 0")
    assert "interval_note" in data["context_recall"]


def test_a_monitor_window_of_one_row_has_no_interval():
    from judge.monitor.monitor import alert_line
    from judge.monitor.windows import metric_summary

    one = metric_summary([0.4], (0.0, 1.0))
    assert one == {"scored": 1, "mean": 0.4, "ci_low": None, "ci_high": None}
    line = alert_line(
        {
            "metric": "faithfulness",
            "window": 7,
            "current": one,
            "baseline": {"mean": 0.9, "ci_low": 0.85, "ci_high": 0.95},
            "worst": [{"trace_id": "t1"}],
        }
    )
    assert "0.400 [–, –] against the baseline's 0.900 [0.850, 0.950]" in line


@pytest.mark.parametrize("n", [20, 50, 100, 1000])
def test_one_value_off_the_end_is_no_narrower_than_none(n):
    # 50 rows all 1 gave [0.929, 1] (the exact bound), 49 of 1 and one 0 gave [0.940, 1]:
    # a run with a failure looked more certain than a perfect one.
    perfect = np.ones(n)
    one_off = perfect.copy()
    one_off[0] = 0.0
    low_perfect = bootstrap_ci(perfect, bounds=(0.0, 1.0))[0]
    low_one_off = bootstrap_ci(one_off, bounds=(0.0, 1.0))[0]
    assert low_one_off <= low_perfect
    high_none = bootstrap_ci(1 - perfect, bounds=(0.0, 1.0))[1]
    assert bootstrap_ci(1 - one_off, bounds=(0.0, 1.0))[1] >= high_none
    # conversations: one conversation off the end of 20
    clusters = np.repeat(np.arange(n // 2 if n > 20 else 10), 2)[:n]
    size = clusters.size
    low_c = bootstrap_ci(one_off[:size], clusters=clusters, bounds=(0.0, 1.0))[0]
    assert low_c <= bootstrap_ci(perfect[:size], clusters=clusters, bounds=(0.0, 1.0))[0]
