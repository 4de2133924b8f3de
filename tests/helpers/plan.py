"""A pilot run's folder, shared by the tests of judge plan."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from judge.run.rows import ResultRow


def write_run(path: Path, scores: np.ndarray, conversations: np.ndarray | None = None) -> Path:
    """results.jsonl of rows q0, q1, ... with one faithfulness score each (and a
    conversation each, as turns)."""
    lines = []
    for i, score in enumerate(scores.tolist()):
        turn = {} if conversations is None else {"conversation_id": f"c{conversations[i]}"}
        row = ResultRow(row=i, id=f"q{i}", scores={"faithfulness": score}, turn=2, **turn)
        lines.append(row.json_line() + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path
