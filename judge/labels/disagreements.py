"""The rows (or pairs) where the judge and the people disagree most, with the judge's evidence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from judge.labels.check import Labels
from judge.labels.measures import Ties
from judge.run.rows import ResultRow


def row_view(row: ResultRow, metric: str, label: float, group: str | None) -> dict[str, Any]:
    """What a person needs to judge a disagreement: inputs, label, score and evidence."""
    return {
        "row": row.row,
        "id": row.id,
        "label": label,
        "score": row.scores.get(metric, math.nan),
        "group": group,
        "question": row.question,
        "answer": row.answer,
        "contexts": row.contexts,
        "ground_truth": row.ground_truth,
        "evidence": row.evidence,
    }


def worst(
    labels: Labels, rows: Sequence[ResultRow], metric: str, oriented: np.ndarray, limit: int
) -> list[dict[str, Any]]:
    """The worst disagreements, worst first, at most `limit`.

    Binary: rows on the wrong side of 0.5, by distance from the label. Graded: rows by how
    far apart their score's rank and their label's rank are, as a share of the rows. Pairwise:
    pairs the judge ordered the wrong way, by score margin, then pairs it tied.
    """

    def group(i: int) -> str | None:
        return labels.groups[i] if labels.groups else None

    def view(i: int) -> dict[str, Any]:
        return row_view(rows[i], metric, float(labels.values[i]), group(i))

    if labels.kind == "pairwise":
        found: list[tuple[float, dict[str, Any]]] = []
        for pair in labels.pairs:
            margin = float(oriented[pair.other] - oriented[pair.preferred])
            if margin >= 0:  # NaN (an unscored row) compares False: left out
                entry = {"pair": pair.id, "margin": margin}
                found.append(
                    (
                        margin,
                        {**entry, "preferred": view(pair.preferred), "other": view(pair.other)},
                    )
                )
        found.sort(key=lambda e: -e[0])  # stable: equal margins stay in pair order
        return [entry for _, entry in found[:limit]]
    scored = np.flatnonzero(~np.isnan(oriented))
    if labels.kind == "binary":
        gaps = np.abs(oriented[scored] - labels.values[scored])
        wrong = (oriented[scored] >= 0.5) != (labels.values[scored] == 1)
    else:
        ones = np.ones((1, scored.size))
        by_score = Ties(oriented[scored]).ranks(ones)[0]
        by_label = Ties(labels.values[scored]).ranks(ones)[0]
        gaps = np.abs(by_score - by_label) / max(1, scored.size)
        wrong = gaps > 0
    order = sorted(np.flatnonzero(wrong), key=lambda k: (-gaps[k], scored[k]))
    return [{**view(int(scored[k])), "gap": float(gaps[k])} for k in order[:limit]]
