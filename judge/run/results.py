"""The result of a batch evaluation: one row per input row, and a summary per metric.

Undefined values (a score with a NaN reason, a mean over no rows) are NaN in every Python
object and in pandas, and null in JSON files (results.jsonl, summary.json).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from judge.formatting import MISSING, noted, number
from judge.json_values import nan_to_null
from judge.run.config import RunConfig
from judge.run.corrected import Corrector
from judge.run.folder import record_written
from judge.run.gates import Gates
from judge.run.outputs import RunOutcome, write_outputs
from judge.run.rows import MetricSummary, ResultRow, RowTally

__all__ = ["EvaluationResult", "MetricSummary", "ResultRow", "RowTally"]


class EvaluationResult:
    """Rows in input order, each with its row number, inputs, scores, reasons and evidence.

    `rows` is any sequence: `judge.evaluate` gives one that reads each row back from disk
    when asked (see `judge.run.checkpoint.RowFile`), so a run of 100,000 rows keeps only
    score vectors in memory (where each row is, `RowOffsets`, is on disk too). Summaries
    and counts are computed once, in one pass, when the result is made (or taken from
    `tally`, gathered as the rows were written); `list(result.rows)` holds every row at
    once.
    """

    def __init__(
        self,
        rows: Sequence[ResultRow],
        metrics: list[str],
        config: RunConfig | Mapping[str, Any],
        usage: dict[str, Any],
        *,
        tally: RowTally | None = None,
    ):
        self.rows = rows
        self.metrics = metrics
        # summary.json's config, typed (a mapping of its JSON form is read into one)
        self.config = config if isinstance(config, RunConfig) else RunConfig.from_json(config)
        self.usage = usage
        if tally is None:
            tally = RowTally(metrics)
            for row in rows:
                tally.add(row)
        self._tally = tally
        self.summary = tally.summaries(metrics)

    @property
    def tally(self) -> RowTally:
        """What the summaries and counts were computed from, gathered in one pass."""
        return self._tally

    @property
    def rows_with_errors(self) -> int:
        """Rows that could not be evaluated (bad input) or had a judge fail."""
        return self._tally.failed

    @property
    def judged_rows(self) -> int:
        """Rows whose input was good, so their judges ran (or came from the cache)."""
        return self._tally.judged

    @property
    def rows_with_judge_errors(self) -> int:
        """Judged rows in which at least one judge failed (a `judge_error` NaN)."""
        return self._tally.judge_errored

    @property
    def judge_error_rate(self) -> float:
        """Share of the judged rows in which a judge failed; 0.0 when no row was judged.

        Their scores are missing from the means, which can move by up to this share:
        `judge eval` fails a run above `--max-error-rate`; the library never raises for it.
        """
        judged = self.judged_rows
        return self.rows_with_judge_errors / judged if judged else 0.0

    def scores(self, metric: str) -> list[float]:
        """The metric's defined scores (NaNs left out), in row order."""
        return list(self._tally.defined(metric).tolist())

    def worst(self, limit: int = 10) -> list[ResultRow]:
        """The worst rows, at most `limit`: rows that failed (bad input, or a judge failed)
        first, then those with the lowest mean of their defined scores; ties in row order.
        Rows whose every defined score is 1 are left out (`RowTally.worst`)."""
        return [self.rows[i] for i in self._tally.worst(limit)]

    def summary_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-able data (NaN as null). A run whose rows are turns of
        conversations also has `resampled` (the intervals resampled conversations) and
        `by_turn` (each metric's mean by turn position); other runs' are as they were."""
        return nan_to_null(  # type: ignore[no-any-return]
            {
                "metrics": {m: asdict(s) for m, s in self.summary.items()},
                **self._conversation_summary(),
                "rows": len(self.rows),
                "rows_with_errors": self.rows_with_errors,
                "judge_errors": {
                    "rows": self.rows_with_judge_errors,
                    "judged_rows": self.judged_rows,
                    "rate": self.judge_error_rate,
                },
                "usage": self.usage,
                "config": self.config.as_json(),
            }
        )

    def _conversation_summary(self) -> dict[str, Any]:
        """summary.json's `resampled` and `by_turn`, for a run of conversations' turns."""
        resampling = self._tally.resampling()
        if resampling.unit != "conversation":
            return {}
        return {
            "resampled": resampling.to_json(),
            "by_turn": [t.to_json() for t in self._tally.by_turn(self.metrics)],
        }

    def flat_rows(self) -> list[dict[str, Any]]:
        """One flat record per row: inputs, a column per metric (NaN when undefined), reasons."""
        out = []
        for row in self.rows:
            flat: dict[str, Any] = {
                k: getattr(row, k)
                for k in ("row", "id", "question", "answer", "contexts", "ground_truth", "error")
            }
            for m in self.metrics:
                flat[m] = row.scores.get(m, math.nan)
                flat[f"{m}_reason"] = row.reasons.get(m)
            out.append(flat)
        return out

    def to_pandas(self) -> Any:
        """A pandas DataFrame, one row per input row, a column per metric."""
        import pandas

        return pandas.DataFrame(self.flat_rows())

    def to_dataset(self) -> Any:
        """A datasets.Dataset with the same columns as `to_pandas()`."""
        import datasets

        return datasets.Dataset.from_pandas(self.to_pandas(), preserve_index=False)

    def write_jsonl(self, path: str | os.PathLike[str]) -> str:
        """Every row with its evidence and usage as JSON lines, in input order (NaN as
        null); returns the sha256 of the file written (summary.json records it)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        lines = getattr(self.rows, "json_lines", None)  # rows on disk give their text
        texts = lines() if lines is not None else (row.json_line() + "\n" for row in self.rows)
        digest = hashlib.sha256()
        with open(path, "wb") as out:
            for text in texts:
                data = text.encode("utf-8")
                digest.update(data)
                out.write(data)
        return digest.hexdigest()

    def write(
        self,
        out: str | os.PathLike[str],
        *,
        gates: Gates | Iterable[str] | None = None,
        fail_under: Mapping[str, float] | None = None,
        max_error_rate: float = 0.05,
        record: bool = True,
        labels: Corrector | None = None,
    ) -> RunOutcome:
        """Write the folder `judge eval` writes (results.jsonl, report.html, summary.json,
        and a shard's shard.json), byte for byte, and apply its gates.

        The files are published whole: written under temporary names, then renamed into
        place, summary.json last with the sha256 of results.jsonl; the folder is locked
        while it is written.

        Args:
            out: the folder; created if absent.
            gates: bounds on the means as `judge eval --gate` takes them, e.g.
                `["faithfulness>=0.8", "hallucination_rate<=0.05"]`, or a `judge.Gates`
                (then without fail_under and max_error_rate). A gate naming a metric the
                run did not compute is an error, and nothing is written.
            fail_under: metric -> the lowest mean that passes (`--fail-under`); refused
                for a metric where lower is better (cap it with a gate instead).
            max_error_rate: the largest share of judged rows with a failed judge, and of
                all rows that could not be read, that passes (`--max-error-rate`).
            record: record the run in the run store ($JUDGE_RUNS, else
                .judge/runs.sqlite), as `judge eval` does, so `judge runs` and `judge view`
                show it (a shard's is not recorded: `judge merge` records the whole run);
                False skips it (`--no-record`).
            labels: people's labels of some of the rows, as
                `judge.labels.estimate.Labels("labels.jsonl", label="faithful")`
                (`--labels`, `--label`): the labelled metric's mean corrected by them
                (prediction-powered inference) goes into summary.json
                (`label_corrected`) and the report, and its gates are held to the
                corrected interval: a floor by its lower end, a cap by its upper end.

        Returns:
            A `judge.run.outputs.RunOutcome`: `code` is `judge eval`'s exit code (0
            passed, 1 a threshold missed, 3 scores missing), with the reasons.
        """
        outcome = write_outputs(
            self,
            out,
            gates=gates,
            fail_under=fail_under,
            max_error_rate=max_error_rate,
            labels=labels,
        )
        if record and self.config.shard is None:
            record_written(outcome.folder, command="python")
        return outcome

    def write_csv(self, path: str | os.PathLike[str]) -> None:
        """The flat rows as CSV (contexts as a JSON list); a text cell a spreadsheet would
        take for a formula (`=`, `+`, `-`, `@` ... first) gets a quote in front, numbers
        stay numbers (`judge.spreadsheet`)."""
        from pandas.api.types import is_numeric_dtype

        from judge.spreadsheet import safe_cell

        frame = self.to_pandas()
        frame["contexts"] = [json.dumps(c, ensure_ascii=False) for c in frame["contexts"]]
        for column in frame.columns:
            if not is_numeric_dtype(frame[column]):  # text, None, ids of text and numbers
                frame[column] = frame[column].map(safe_cell)
        frame.columns = [safe_cell(str(c)) for c in frame.columns]
        # CRLF, as RFC 4180 writes it: the csv module quotes a cell holding a character of
        # the line terminator, so a text with a lone "\r" cannot end a row ("\n" would not).
        frame.to_csv(path, index=False, lineterminator="\r\n")

    def write_parquet(self, path: str | os.PathLike[str]) -> None:
        """The flat rows as Parquet."""
        self.to_pandas().to_parquet(path, index=False)

    def table(self) -> str:
        """The summary as a text table for the terminal."""
        lines = [f"{'metric':<22} {'mean':>7} {'95% CI':>17} {'scored':>7} {'errors':>7}  NaN"]
        for s in self.summary.values():
            mean = number(s.mean)
            ci = MISSING if math.isnan(s.ci_low) else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            nan = ", ".join(f"{k} {v}" for k, v in s.nan.items()) or MISSING
            lines.append(f"{s.metric:<22} {mean:>7} {ci:>17} {s.scored:>7} {s.errored:>7}  {nan}")
        resampling = self._tally.resampling()
        notes = self._tally.interval_notes([s.metric for s in self.summary.values()])
        if notes:
            lines += ["", *noted(notes)]
        if resampling.unit == "conversation":
            lines += ["", f"95% CI {resampling}.", "", *self.turn_table()]
        return "\n".join(lines)

    def turn_table(self) -> list[str]:
        """Each metric's mean by turn position, as lines of text; [] unless the rows are
        turns of conversations. Position k holds each conversation's k-th judged turn
        (its turns ranked by `turn`)."""
        positions = self._tally.by_turn(self.metrics)
        if not positions:
            return []
        cells = [f"{'turn ' + str(p.position):>8}" for p in positions]
        lines = [
            "mean by turn position (each conversation's turns in order of `turn`)",
            f"{'metric':<22} " + " ".join(cells),
            f"{'turns':<22} " + " ".join(f"{p.turns:>8}" for p in positions),
        ]
        for metric in self.metrics:
            means = " ".join(f"{number(p.means[metric]):>8}" for p in positions)
            lines.append(f"{metric:<22} {means}")
        return lines
