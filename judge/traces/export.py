"""judge's scores back beside the traces they judge: the public names of `judge traces
export`, each defined in the module that has its one job.

- `judge.traces.events`: the OpenTelemetry `gen_ai.evaluation.result` events of a run's
  results, linked to the traces and spans the rows came from;
- `judge.traces.explanations`: each event's short explanation;
- `judge.traces.reading`: the files read (results.jsonl, the rows file);
- `judge.traces.otlp_export`: OTLP JSON lines and the SDK's OTLP/HTTP log exporter;
- `judge.traces.phoenix_export`: Phoenix span evaluations.
"""

from __future__ import annotations

from judge.traces.events import (
    ERROR_TYPE,
    EVENT_NAME,
    EXPLANATION,
    FAIL,
    NAME,
    PASS,
    ROW_ERROR,
    SCORE_LABEL,
    SCORE_VALUE,
    EvaluationEvent,
    EvaluationEvents,
    TraceLink,
    evaluation_events,
    trace_links,
)
from judge.traces.explanations import EXPLANATION_CHARS, explain
from judge.traces.otlp_export import (
    BATCH,
    DEFAULT_LOGS_PATH,
    SERVICE_NAME,
    logs_endpoint,
    otlp_json_lines,
    send_otlp,
    write_otlp_json,
)
from judge.traces.phoenix_export import (
    PHOENIX_COLUMNS,
    PhoenixEvaluations,
    annotator_kind,
    phoenix_evaluations,
    write_phoenix,
)
from judge.traces.reading import read_results, read_rows

__all__ = [
    "BATCH",
    "DEFAULT_LOGS_PATH",
    "ERROR_TYPE",
    "EVENT_NAME",
    "EXPLANATION",
    "EXPLANATION_CHARS",
    "FAIL",
    "NAME",
    "PASS",
    "PHOENIX_COLUMNS",
    "ROW_ERROR",
    "SCORE_LABEL",
    "SCORE_VALUE",
    "SERVICE_NAME",
    "EvaluationEvent",
    "EvaluationEvents",
    "PhoenixEvaluations",
    "TraceLink",
    "annotator_kind",
    "evaluation_events",
    "explain",
    "logs_endpoint",
    "otlp_json_lines",
    "phoenix_evaluations",
    "read_results",
    "read_rows",
    "send_otlp",
    "trace_links",
    "write_otlp_json",
    "write_phoenix",
]
