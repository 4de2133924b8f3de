"""judge.monitor.alerts: the drop test's false-alarm bound checked by simulation, detection
of a real drop, its state resumed exactly, NaN scores, direction, and degenerate baselines."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from judge.errors import JudgeError
from judge.monitor.alerts import Alert, DropDetector, betting_interval

# Faithfulness-like per-trace scores: Beta with mean 0.85, most mass near 1.
CONCENTRATION = 4.0


def beta_scores(rng: np.random.Generator, mean: float, n: int) -> np.ndarray:
    return rng.beta(mean * CONCENTRATION, (1 - mean) * CONCENTRATION, n)


def test_false_alarms_on_stable_streams_stay_within_the_documented_rate():
    """200 streams x 100 windows of 50 traces that never drop, each against a baseline of
    200 rows of its own: at most alpha per window, with the binomial's 99.9% margin. (A
    test that compared against the baseline's mean instead of its interval's lower end
    raised 335 here, against a bound of 243.)"""
    alpha, streams, windows = 0.01, 200, 100
    rng = np.random.default_rng(20261206)
    alerts = 0
    for _ in range(streams):
        detector = DropDetector(beta_scores(rng, 0.85, 200), alpha=alpha)
        for _ in range(windows):
            alerts += detector.update(beta_scores(rng, 0.85, 50)) is not None
    bound = binom.ppf(0.999, streams * windows, alpha)
    assert alerts <= bound, f"{alerts} false alarms in {streams * windows} windows"


def test_a_drop_of_0_10_alerts_within_five_windows_and_not_before():
    rng = np.random.default_rng(41)
    for _ in range(20):
        detector = DropDetector(beta_scores(rng, 0.85, 1000), metric="faithfulness")
        for _ in range(10):
            assert detector.update(beta_scores(rng, 0.85, 50)) is None
        found = [detector.update(beta_scores(rng, 0.75, 50)) for _ in range(5)]
        alert = next(a for a in found if a is not None)
        assert alert.metric == "faithfulness" and alert.higher_is_better
        assert 10 <= alert.window < 15 and 10 <= alert.since_window <= alert.window
        # Evidence is a bet that paid: the scores since its start average below the reference.
        assert alert.since_mean < alert.reference <= alert.baseline_interval[0]
        assert alert.baseline_interval[0] <= alert.baseline_mean <= alert.baseline_interval[1]
        low, high = alert.current_interval
        assert low <= alert.current_mean <= high
        assert alert.statistic >= alert.threshold == 1000.0
        assert abs(alert.since_mean - 0.75) < 0.08


def test_after_an_alert_the_test_starts_afresh():
    rng = np.random.default_rng(3)
    detector = DropDetector(beta_scores(rng, 0.85, 1000))
    first = detector.update(beta_scores(rng, 0.5, 200))
    assert first is not None and first.window == 0
    assert detector.statistic == 1.0 and detector.alerts == 1
    assert detector.update(beta_scores(rng, 0.85, 200)) is None
    again = detector.update(beta_scores(rng, 0.5, 200))
    assert again is not None and again.since_window == 2


def drop_stream(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [beta_scores(rng, 0.85 if w < 12 else 0.79, 50) for w in range(40)]


def test_a_restarted_detector_resumes_the_test_exactly():
    rng = np.random.default_rng(5)
    baseline = beta_scores(rng, 0.85, 800)
    windows = drop_stream(6)
    whole = DropDetector(baseline, metric="faithfulness")
    alerts_whole = [whole.update(w) for w in windows]
    assert sum(a is not None for a in alerts_whole[16:]) >= 1, "no alert after the resume"

    first = DropDetector(baseline, metric="faithfulness")
    before = [first.update(w) for w in windows[:16]]
    saved = json.dumps(first.to_json(), allow_nan=False)
    assert first.statistic != 1.0  # evidence is under way at the restart
    resumed = DropDetector.from_json(json.loads(saved))
    after = [resumed.update(w) for w in windows[16:]]

    assert before + after == alerts_whole
    assert resumed.to_json() == whole.to_json()


def test_nan_scores_are_skipped_and_counted():
    rng = np.random.default_rng(8)
    baseline = beta_scores(rng, 0.85, 500)
    clean, holed = DropDetector(baseline), DropDetector(np.append(baseline, [math.nan] * 3))
    assert holed.baseline_mean == clean.baseline_mean
    alerted = 0
    for _ in range(6):
        scores = beta_scores(rng, 0.7, 40)
        with_nan = np.insert(scores, [0, 10, 40], math.nan)
        a, b = clean.update(scores), holed.update(with_nan)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            alerted += 1
            assert b.nan_rows == 3 and a.nan_rows == 0
            assert b.current_mean == a.current_mean
            # Positions in the window as given, NaN rows counted in.
            assert [with_nan[p] for p in b.worst_rows] == [scores[p] for p in a.worst_rows]
            assert [scores[p] for p in a.worst_rows] == sorted(scores)[:5]
        assert holed.to_json()["log_statistics"] == clean.to_json()["log_statistics"]
    assert alerted >= 1 and holed.nan_rows == 18 and clean.nan_rows == 0
    state = holed.to_json()
    assert holed.update([math.nan, None]) is None  # None: an undefined score in results.jsonl
    assert holed.windows == state["windows"] + 1 and holed.nan_rows == 20
    assert holed.to_json()["log_statistics"] == state["log_statistics"]


def test_lower_is_better_alerts_on_a_rise_only():
    rng = np.random.default_rng(9)
    baseline = (rng.random(1000) < 0.1).astype(float)  # hallucination_rate, 0/1 per trace
    rising = DropDetector(baseline, metric="hallucination_rate", higher_is_better=False)
    falling = DropDetector(baseline, metric="hallucination_rate", higher_is_better=False)
    assert rising.reference >= rising.baseline_interval[1] > rising.baseline_mean
    found = None
    for _ in range(10):
        assert falling.update((rng.random(200) < 0.01).astype(float)) is None
        found = found or rising.update((rng.random(200) < 0.25).astype(float))
    assert found is not None and not found.higher_is_better
    assert found.current_mean > found.reference and "hallucination_rate rose" in found.message
    assert falling.statistic < 0.1  # an improvement is evidence against a drop


def test_higher_is_better_ignores_a_rise():
    rng = np.random.default_rng(10)
    detector = DropDetector(beta_scores(rng, 0.7, 500))
    for _ in range(30):
        assert detector.update(beta_scores(rng, 0.95, 200)) is None


def test_a_baseline_of_all_ones_works_without_a_variance():
    detector = DropDetector(np.ones(500))
    assert detector.baseline_interval[1] == 1.0 and detector.baseline_interval[0] > 0.98
    for _ in range(50):
        assert detector.update(np.ones(50)) is None
    scores = np.ones(50)
    scores[::10] = 0.0  # a mean of 0.9
    assert any(detector.update(scores) for _ in range(3))


@pytest.mark.parametrize(
    ("baseline", "words"),
    [
        ([0.9], "baseline_scores: score has 1 scored row(s); a baseline needs at least 10"),
        ([math.nan] * 40, "baseline_scores: score has 0 scored row(s) (40 NaN)"),
        ([], "baseline_scores: score has 0 scored row(s); a baseline needs at least 10"),
    ],
)
def test_a_baseline_too_small_says_so(baseline, words):
    with pytest.raises(JudgeError) as error:
        DropDetector(baseline)
    assert words in str(error.value)
    assert str(error.value).endswith("to bound its mean: give more baseline_scores")


def test_a_baseline_at_the_floor_leaves_no_room_for_a_drop():
    with pytest.raises(JudgeError, match="baseline_scores: the lower end of faithfulness"):
        DropDetector(np.zeros(300), metric="faithfulness")
    with pytest.raises(JudgeError, match=r"cannot go above 1\. Give a baseline with more rows"):
        DropDetector(np.ones(300), metric="hallucination_rate", higher_is_better=False)
    with pytest.raises(JudgeError, match=r"min_drop=0\.9 leaves no room for a drop"):
        DropDetector(np.full(300, 0.8), min_drop=0.9)


@pytest.mark.parametrize(
    ("keywords", "words"),
    [
        ({"alpha": 0.0}, "alpha=0.0: give a false-alarm rate per window in (0, 1)"),
        ({"alpha": 1.5}, "alpha=1.5"),
        ({"baseline_alpha": 1.0}, "baseline_alpha=1.0: give a probability in (0, 1)"),
        ({"min_drop": -0.1}, "min_drop=-0.1: give a drop in [0, 1)"),
    ],
)
def test_settings_out_of_range_are_named(keywords, words):
    with pytest.raises(JudgeError) as error:
        DropDetector(np.full(100, 0.8), **keywords)
    assert words in str(error.value)


def test_scores_outside_zero_to_one_are_named():
    detector = DropDetector(np.full(100, 0.8))
    with pytest.raises(JudgeError, match=r"window_scores: row 2 is 1\.5; DropDetector takes"):
        detector.update([0.5, 0.7, 1.5])
    with pytest.raises(JudgeError, match=r"window_scores: row 0 is -inf"):
        detector.update([-math.inf])
    with pytest.raises(JudgeError, match="window_scores: give a flat sequence"):
        detector.update([[0.5, 0.5]])
    with pytest.raises(JudgeError, match=r"baseline_scores: row 1 is 2\.0"):
        DropDetector([0.5, 2.0] * 10)
    assert detector.windows == 0  # a refused window is not counted


def test_a_state_of_another_shape_is_refused():
    with pytest.raises(JudgeError, match="state: not a DropDetector state of format 1"):
        DropDetector.from_json({"format": 99})
    state = DropDetector(np.full(100, 0.8)).to_json()
    del state["bets"]
    with pytest.raises(JudgeError, match="state: a DropDetector state missing or mistyping"):
        DropDetector.from_json(state)


def test_the_alert_is_json_and_one_line():
    rng = np.random.default_rng(11)
    detector = DropDetector(beta_scores(rng, 0.85, 400), metric="faithfulness")
    alert = detector.update(beta_scores(rng, 0.3, 100))
    assert isinstance(alert, Alert)
    data = json.loads(json.dumps(alert.to_json(), allow_nan=False))
    assert data["window"] == 0 and data["threshold"] == 1000.0 and len(data["worst_rows"]) == 5
    assert alert.message.startswith("faithfulness dropped: window 0 mean 0.")
    assert "\n" not in alert.message


def test_the_betting_interval_covers_at_its_level():
    """300 samples of 100 Bernoulli(0.3) values at level 90%: misses within the binomial's
    99.9% margin of 10%, and narrower than Hoeffding's interval."""
    rng = np.random.default_rng(12)
    misses, widths = 0, []
    for _ in range(300):
        values = (rng.random(100) < 0.3).astype(float)
        low, high = betting_interval(values, 0.1)
        misses += not low <= 0.3 <= high
        widths.append(high - low)
    assert misses <= binom.ppf(0.999, 300, 0.1)
    assert np.mean(widths) < 2 * math.sqrt(math.log(2 / 0.1) / (2 * 100))
    assert betting_interval(np.ones(50), 0.01)[1] == 1.0


def test_good_rows_first_in_the_baseline_do_not_reject_its_mean():
    """80 perfect rows, then 920 with the 100 bad ones among them: mean 0.9. Bets grown on
    the first rows once rejected every mean below 0.921 for good (the capital's running
    maximum); the capital at the last row keeps the mean inside."""
    rest = np.ones(920)
    rest[:100] = 0.0
    np.random.default_rng(1).shuffle(rest)
    low, high = betting_interval(np.concatenate([np.ones(80), rest]), 0.01)
    assert low < 0.9 < high


def test_a_run_s_or_windows_baseline_outside_zero_to_one_is_said_by_its_source():
    # The monitor's note for a pinned run (or windows) with a score of 3.0 named
    # DropDetector's keyword, `baseline_scores:`, which no caller of the monitor gave.
    from judge.monitor.alerts import UNCHECKED, drop_check
    from judge.monitor.baseline import Baseline

    check = drop_check()
    for base, source in (
        (Baseline([0.5, 3.0] * 10, run="3f2a9c1b7d0e"), "run 3f2a9c1b7d0e"),
        (Baseline([0.5, 3.0] * 10, windows=(0, 1)), "the first 2 windows"),
    ):
        alert, state = check("rating", base, [0.5], None, number=0)
        assert alert is None
        assert "baseline_scores" not in state[UNCHECKED]
        assert state[UNCHECKED].startswith(f"rating's baseline ({source}): row 1 is 3.0; ")
