"""judge.stats at its edges: a NaN difference in the randomisation test, and the smallest
p-value a test can reach, which decides whether a regression gate could fail at all."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.errors import InputFormatError
from judge.stats import permutation_p_value


@pytest.mark.parametrize("size", [5, 30])  # exact, then Monte Carlo
def test_a_nan_difference_is_refused_not_a_p_value_of_zero(size: int):
    diff = np.linspace(-0.2, 0.3, size)
    diff[1] = math.nan
    with pytest.raises(InputFormatError, match=r"diff= holds 1 NaN difference of"):
        permutation_p_value(diff)
    with pytest.raises(InputFormatError, match=r"NaN"):
        permutation_p_value(diff, clusters=np.arange(size) // 2)
    assert math.isnan(permutation_p_value(np.array([])))  # no differences: no test


def test_an_infinite_difference_is_refused_not_a_p_value_of_zero():
    # inf differences gave p = 0, below the test's own floor of 2/2^n (a "significant"
    # regression from one score written as Infinity in a results file).
    diff = np.array([math.inf, 0.1, -0.1, 0.2, 0.0, 0.3])
    with pytest.raises(InputFormatError, match=r"diff= holds 1 infinite difference of 6"):
        permutation_p_value(diff)
    with pytest.raises(InputFormatError, match=r"infinite"):
        permutation_p_value(np.full(6, -math.inf))
