"""Run records made up for the run store's tests."""

from __future__ import annotations

from typing import Any

from judge.runs.store import RunRecord, new_run_id, utc_now


def record(**changes: Any) -> RunRecord:
    """A run's record with plausible fields; `changes` replaces any of them."""
    fields: dict[str, Any] = {
        "id": new_run_id(),
        "name": None,
        "created": utc_now(),
        "command": "eval",
        "out_dir": "/tmp/judge-results",
        "data": "examples/data.jsonl",
        "data_sha256": "ab" * 32,
        "model": "openai/gpt-4o-mini",
        "embeddings": None,
        "prompts": {"faithfulness": "0123abcd"},
        "metrics": ["faithfulness"],
        "summary": {"faithfulness": {"mean": 0.75, "ci_low": 0.5, "ci_high": 1.0, "scored": 4}},
        "rows": 4,
        "git": None,
        "app": None,
        "tags": [],
        "baseline": False,
    }
    fields.update(changes)
    return RunRecord(**fields)
