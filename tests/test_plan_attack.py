"""Attacks on `judge plan` (issue 42): degenerate pilots."""

from __future__ import annotations

import json

import numpy as np
import pytest

import judge
from judge.errors import InputFormatError
from tests.helpers.plan import write_run


@pytest.mark.parametrize("value", [0, 1])
def test_a_pilot_of_labels_all_the_same_plans_no_count(tmp_path, value):
    """Labels all alike have no spread: the normal half-width is 0 at any count, so the
    plan said 2 labels were enough for any width (and judge estimate would give them an
    exact binomial interval, far wider)."""
    run = write_run(tmp_path / "run.jsonl", np.linspace(0, 1, 40))
    labels = tmp_path / "labels.jsonl"
    sample = {"method": "random", "seed": 1, "of": 40}
    labels.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "ok": value, "sample": sample}) + "\n"
            for i in range(0, 40, 4)
        ),
        encoding="utf-8",
    )
    with pytest.raises(InputFormatError, match=f"labels are all {value}"):
        judge.plan_labels(run, metric="faithfulness", half_width=0.05, labels=labels, label="ok")
