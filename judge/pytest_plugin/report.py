"""`--judge-report DIR`: the samples judged by a test session as `judge eval`'s output
folder (results.jsonl, summary.json, report.html).

Each pytest process (each xdist worker) appends the rows it judged to a part file of its
own under DIR/.parts/; the controller, at the end, joins them in a fixed order (by test
id, then call, then row) and writes the folder, so the same tests give the same bytes
however many workers ran them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from judge.errors import JudgeError
from judge.json_values import canonical_json, dumps_nan_as_null, sha256_hex
from judge.llm.usage import COUNTED

PARTS = ".parts"


def write_part(folder: Path, worker: str, nodeid: str, call: int, kind: str, result: Any) -> None:
    """Append what one judged call of a test gave to this process's part file."""
    from judge.run.rows import ResultRow

    parts = folder / PARTS
    parts.mkdir(parents=True, exist_ok=True)
    if kind == "sample":
        s = result.sample
        rows = [
            ResultRow(
                0,
                s.id,
                s.question,
                s.answer,
                list(s.contexts),
                s.ground_truth,
                scores=dict(result.scores),
                reasons=dict(result.reasons),
                errors=dict(result.errors),
                evidence=result.evidence,
                usage=result.usage,
            )
        ]
    else:
        rows = list(result.rows)
    suffix = f"#{call}" if call > 1 else ""
    with open(parts / f"{worker}.jsonl", "a", encoding="utf-8") as out:
        for number, row in enumerate(rows):
            # A row's id names the test that judged it (and the row's own id, of many).
            row.id = f"{nodeid}{suffix}" if kind == "sample" else f"{nodeid}{suffix}::{row.id}"
            line = {"nodeid": nodeid, "call": call, "number": number, "row": row.json_fields()}
            out.write(dumps_nan_as_null(line) + "\n")


def clear_parts(folder: Path) -> None:
    """Forget the parts a session before left (a run that was stopped)."""
    shutil.rmtree(folder / PARTS, ignore_errors=True)


def write_report(folder: Path, settings: Mapping[str, Any] | None = None) -> Path | None:
    """Join the part files under `folder` into `judge eval`'s output folder there; None
    when no test judged anything. The parts are removed once the folder is written.

    Args:
        folder: the `--judge-report` folder.
        settings: the judge's settings as summary.json's config names them (model,
            embedding_model, cache, mode).
    """
    from judge.metrics.prompts import load_prompts
    from judge.run.config import RunConfig
    from judge.run.plan import prompt_versions
    from judge.run.results import EvaluationResult
    from judge.run.rows import ResultRow

    parts = folder / PARTS
    if not parts.is_dir():
        return None
    entries = []
    for path in sorted(parts.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entries.append(json.loads(line))
    if not entries:
        return None
    entries.sort(key=lambda e: (e["nodeid"], e["call"], e["number"]))
    rows: list[ResultRow] = []
    metrics: dict[str, None] = {}
    usage: dict[str, Any] = dict.fromkeys(COUNTED, 0)
    priced = True
    for number, entry in enumerate(entries):
        data = dict(entry["row"])
        data["row"] = number
        row = ResultRow.from_json(data)
        rows.append(row)
        metrics.update(dict.fromkeys(row.scores))
        total = (row.usage or {}).get("total", {})
        for name in COUNTED:
            usage[name] += total.get(name, 0) or 0
        priced = priced and total.get("cost") is not None
    usage["cost"] = usage["known_cost"] if priced else None
    given = dict(settings or {})
    inputs = [[r.id, r.question, r.answer, r.contexts, r.ground_truth] for r in rows]
    config = RunConfig(
        source="pytest",
        columns={},
        metrics=list(metrics),
        model=given.get("model"),
        embeddings=given.get("embedding_model"),
        structured_output=None,
        prompts=prompt_versions(load_prompts()),
        cache=given.get("cache"),
        cache_mode=given.get("mode"),
        run=sha256_hex(canonical_json({"metrics": list(metrics), "model": given.get("model")})),
        data_rows=len(rows),
        data_sha256=sha256_hex(canonical_json(inputs)),
    )
    result = EvaluationResult(rows, list(metrics), config, usage)
    try:
        result.write(folder, max_error_rate=1.0, record=False)
    except OSError as exc:
        raise JudgeError(f"--judge-report {folder}: cannot be written ({exc})") from None
    shutil.rmtree(parts, ignore_errors=True)
    return folder
