"""Evaluation events as Phoenix span evaluations: one frame per metric, and the parquet
file Phoenix's client logs in one call."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.errors import JudgeError
from judge.ir.measure_names import parse_measure
from judge.traces.events import EvaluationEvent

if TYPE_CHECKING:
    import pandas as pd

PHOENIX_COLUMNS = ("span_id", "score", "label", "explanation")


def annotator_kind(metric: str) -> str:
    """Phoenix's annotator kind of a metric: CODE for a retrieval metric, LLM otherwise."""
    try:
        parse_measure(metric)
    except JudgeError:
        return "LLM"
    return "CODE"


@dataclass
class PhoenixEvaluations:
    """Span evaluations in the shape Phoenix's client logs: one frame per metric.

    Attributes:
        frames: metric -> a frame with columns span_id, score, label, explanation (one row
            per judged span), as `phoenix.trace.SpanEvaluations(eval_name=metric,
            dataframe=frame)` and the client's `log_span_annotations_dataframe(dataframe=
            frame, annotation_name=metric, annotator_kind=...)` take it.
        without_span: events left out because their row had a trace id but no span id.
        without_score: events left out because their score is undefined: Phoenix's client
            reads a frame's null score as NaN, which it cannot send as JSON (the OTLP
            events keep them, with their reason).
    """

    frames: dict[str, pd.DataFrame]
    without_span: int = 0
    without_score: int = 0

    def table(self) -> pd.DataFrame:
        """Every frame in one, with the columns `name` and `annotator_kind` added: what
        `Client().spans.log_span_annotations_dataframe(dataframe=...)` takes in one call."""
        import pandas as pd

        parts = [
            frame.assign(name=metric, annotator_kind=annotator_kind(metric))
            for metric, frame in sorted(self.frames.items())
        ]
        columns = ["name", *PHOENIX_COLUMNS, "annotator_kind"]
        if not parts:
            return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in columns})
        return pd.concat(parts, ignore_index=True)[columns]


def _dtype(column: str) -> str:
    return "float64" if column == "score" else "object"


def phoenix_evaluations(events: Iterable[EvaluationEvent]) -> PhoenixEvaluations:
    """The events with a score as Phoenix span evaluations, one frame per metric (pandas
    needed); events without a span id or without a score are counted, not framed.

    No label or no explanation is an empty string, which Phoenix's client leaves out: a null
    would come back from parquet as NaN, which the client sends as the text "nan".
    """
    import pandas as pd

    by_metric: dict[str, dict[str, list[Any]]] = {}
    without_span = without_score = 0
    for event in events:
        if event.span_id is None:
            without_span += 1
            continue
        if event.score is None:
            without_score += 1
            continue
        columns = by_metric.setdefault(event.metric, {c: [] for c in PHOENIX_COLUMNS})
        columns["span_id"].append(event.span_id)
        columns["score"].append(event.score)
        columns["label"].append(event.label or "")
        columns["explanation"].append(event.explanation or "")
    frames = {
        metric: pd.DataFrame({c: pd.Series(v, dtype=_dtype(c)) for c, v in columns.items()})
        for metric, columns in by_metric.items()
    }
    return PhoenixEvaluations(frames, without_span, without_score)


def write_phoenix(evaluations: PhoenixEvaluations, path: str | os.PathLike[str]) -> Path:
    """Write the span evaluations to one parquet file (`PhoenixEvaluations.table`); returns
    the path. Parquet keeps the types and the null labels as they are, and is what Phoenix
    itself exports spans to: `pd.read_parquet(path)` gives the frame the client logs in one
    call.

    Args:
        evaluations: the span evaluations.
        path: a .parquet file to write (replaced).
    """
    target = Path(path)
    if target.suffix != ".parquet":
        raise JudgeError(
            f"{target}: Phoenix span evaluations are written as parquet; give a .parquet path"
        )
    evaluations.table().to_parquet(target, index=False)
    return target
