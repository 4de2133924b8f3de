"""What `judge.probe` returns: the checks, the runs behind them, text and JSON views."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from judge.formatting import number
from judge.json_values import nan_to_null
from judge.probes.checks import Check
from judge.run.results import EvaluationResult


def verdict(held: bool | None) -> str:
    """How a check's outcome is printed."""
    return "n/a" if held is None else "held" if held else "FAILED"


def figures(check: Check) -> list[str]:
    """A check's figures as text: counts whole, intervals beside their value."""
    out = []
    for name, value in check.figures.items():
        if name.endswith(("_ci_low", "_ci_high")):
            continue
        if name.startswith("rows_"):
            out.append(f"{name} {value:.0f}")
            continue
        text = f"{name} {number(value)}"
        low, high = check.figures.get(f"{name}_ci_low"), check.figures.get(f"{name}_ci_high")
        if low is not None and high is not None and not math.isnan(low):
            text += f" [{number(low)}, {number(high)}]"
        out.append(text)
    return out


class ProbeResult:
    """The probes' checks, each naming its expectation and whether it held.

    Attributes:
        checks: one `Check` per probe (or variant) and metric, in probe order.
        runs: variant name ("base", "repeat 1", "order", "verbosity", "granularity:joined",
            "second model", ...) -> its `EvaluationResult`, rows in input order.
        config: source, rows, metrics, probes, models, repeats, threshold, seed, tolerances.
    """

    def __init__(
        self, checks: list[Check], runs: dict[str, EvaluationResult], config: dict[str, Any]
    ):
        self.checks, self.runs, self.config = checks, runs, config

    @property
    def failed(self) -> list[Check]:
        """The checks whose expectation did not hold."""
        return [c for c in self.checks if c.held is False]

    def runs_of(self, check: Check) -> list[str]:
        """The runs a check compares: the base run (but for repeats) and its variants."""
        if check.probe == "repeat":
            return [name for name in self.runs if name.startswith("repeat ")]
        variant = "second model" if check.probe == "models" else check.probe
        return ["base", variant]

    def moved(self, check: Check) -> list[dict[str, Any]]:
        """The rows that moved most in a check: row, id, question, score in each run."""
        return [
            {
                "row": i,
                "id": self.runs["base"].rows[i].id,
                "question": self.runs["base"].rows[i].question,
                "scores": {
                    name: self.runs[name].rows[i].scores.get(check.metric, math.nan)
                    for name in self.runs_of(check)
                },
            }
            for i in check.worst
        ]

    def usage(self) -> dict[str, dict[str, Any]]:
        """Requests, cache hits and tokens of each variant's run."""
        return {name: run.usage for name, run in self.runs.items()}

    def to_dict(self) -> dict[str, Any]:
        """Everything as JSON-able data, undefined values as null; scores per variant."""
        scores = {
            name: {m: [r.scores.get(m) for r in run.rows] for m in run.metrics}
            for name, run in self.runs.items()
        }
        return nan_to_null(  # type: ignore[no-any-return]
            {
                "checks": [asdict(c) for c in self.checks],
                "held": sum(c.held is True for c in self.checks),
                "failed": len(self.failed),
                "ids": [r.id for r in self.runs["base"].rows],
                "scores": scores,
                "usage": self.usage(),
                "config": self.config,
            }
        )

    def write_json(self, path: str | os.PathLike[str]) -> None:
        """Write `to_dict()` as probe.json."""
        Path(path).write_text(
            json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )

    def table(self) -> str:
        """Each check on a line with its figures, then the expectations."""
        lines = [f"{'probe':<19} {'metric':<18} {'rows':>5}  {'result':<6}  figures"]
        for c in self.checks:
            shown = ", ".join(figures(c))
            line = f"{c.probe:<19} {c.metric:<18} {c.rows:>5}  {verdict(c.held):<6}  {shown}"
            lines.append(line + (f"  ({c.note})" if c.note else ""))
        lines += ["", "expectations:"]
        seen = set()
        for c in self.checks:
            if (c.probe, c.expectation) not in seen:
                seen.add((c.probe, c.expectation))
                lines.append(f"  {c.probe}: {c.expectation}")
        held = sum(c.held is True for c in self.checks)
        lines += ["", f"{held} of {len(self.checks)} checks held, {len(self.failed)} failed"]
        return "\n".join(lines)
