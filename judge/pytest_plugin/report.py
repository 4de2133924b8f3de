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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.errors import JudgeError
from judge.json_values import canonical_json, dumps_nan_as_null, sha256_hex
from judge.llm.usage import COUNTED

if TYPE_CHECKING:
    from judge.pytest_plugin.rag_judge import JudgeSettings
    from judge.run.config import RunConfig
    from judge.run.rows import ResultRow

PARTS = ".parts"


def write_part(folder: Path, worker: str, nodeid: str, call: int, kind: str, result: Any) -> None:
    """Append what one judged call of a test gave to this process's part file (a
    conversation's turns: one row each, under the call of its first turn)."""
    parts = folder / PARTS
    parts.mkdir(parents=True, exist_ok=True)
    suffix = f"#{call}" if call > 1 else ""
    if kind == "sample":
        rows = [_sample_row(result)]
    elif kind == "conversation":
        rows = [_sample_row(turn) for turn in result.turns]
    else:
        rows = list(result.rows)
    for row in rows:
        if row.conversation_id is not None:
            # The test's conversation (a conversation's turns, or an evaluation's rows of
            # one): another test's of the same id is another one, resampled apart.
            row.conversation_id = f"{nodeid}{suffix}::{row.conversation_id}"
    # The metrics in the order the test named them (a row's scores are written sorted):
    # the run's fingerprint follows it, as judge eval's follows --metrics.
    if kind == "sample":
        names = list(result.scores)
    elif kind == "conversation":
        names = list(dict.fromkeys(m for turn in result.turns for m in turn.scores))
    else:
        names = list(result.metrics)
    with open(parts / f"{worker}.jsonl", "a", encoding="utf-8") as out:
        for number, row in enumerate(rows):
            # A row's id names the test that judged it (and the row's own id, of many).
            row.id = f"{nodeid}{suffix}" if kind == "sample" else f"{nodeid}{suffix}::{row.id}"
            line = {
                "nodeid": nodeid,
                "call": call,
                "number": number,
                "metrics": names,
                "row": row.json_fields(),
            }
            out.write(dumps_nan_as_null(line) + "\n")


def _sample_row(result: Any) -> ResultRow:
    """A judged sample (a conversation's turn too) as a results row."""
    from judge.run.rows import ResultRow

    s = result.sample
    return ResultRow(
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
        conversation_id=s.conversation_id,
        turn=s.turn,
    )


def clear_parts(folder: Path) -> None:
    """Forget the parts a session before left (a run that was stopped)."""
    shutil.rmtree(folder / PARTS, ignore_errors=True)


def write_report(folder: Path, settings: JudgeSettings | None = None) -> Path | None:
    """Join the part files under `folder` into `judge eval`'s output folder there; None
    when no test judged anything. The parts are removed once the folder is written.

    Args:
        folder: the `--judge-report` folder.
        settings: the judge's settings (None: unknown); summary.json's config is derived
            from them and the metrics judged as `judge eval`'s is (`report_config`), so
            the same settings give the same run fingerprint.
    """
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
        metrics.update(dict.fromkeys(entry.get("metrics") or row.scores))
        total = (row.usage or {}).get("total", {})
        for name in COUNTED:
            usage[name] += total.get(name, 0) or 0
        priced = priced and total.get("cost") is not None
    usage["cost"] = usage["known_cost"] if priced else None
    inputs = [[r.id, r.question, r.answer, r.contexts, r.ground_truth] for r in rows]
    config = report_config(list(metrics), settings, len(rows), sha256_hex(canonical_json(inputs)))
    result = EvaluationResult(rows, list(metrics), config, usage)
    try:
        result.write(folder, max_error_rate=1.0, record=False)
    except OSError as exc:
        raise JudgeError(f"--judge-report {folder}: cannot be written ({exc})") from None
    shutil.rmtree(parts, ignore_errors=True)
    return folder


def report_config(
    metrics: list[str], settings: JudgeSettings | None, rows: int, data_sha256: str
) -> RunConfig:
    """summary.json's config of the report: the plan of a run of these metrics with the
    session's models (`judge.run.plan.plan_run`, as every run's), its fingerprint the one
    `judge eval` gives the same metrics, models and servers. A metric no name resolves
    to (a `Metric` object a test passed) is listed but left out of the fingerprint."""
    import dataclasses

    from judge.metrics.plugins import extra_metrics
    from judge.metrics.resolve import named_metric, split_metrics
    from judge.run.plan import plan_run

    llm, embeddings = settings.models() if settings is not None else (None, None)
    project = settings.project if settings is not None else None
    custom = {n: x.metric for n, x in extra_metrics([str(project)] if project else []).items()}
    retrieval = split_metrics(metrics, has_retrieval=True)[1]

    def resolvable(name: str) -> bool:
        if name in retrieval:
            return True
        if llm is None:  # no judge model: no judged metric can be planned
            return False
        try:
            return name in custom or named_metric(name) is not None
        except JudgeError:
            return False

    known = [name for name in metrics if resolvable(name)]
    plan, _ = plan_run(
        None,
        {"retrieved_ids": "retrieved_ids"},  # the retrieval metrics the tests computed
        "pytest",
        metrics=[custom.get(name, name) for name in known],
        llm=llm,
        embeddings=embeddings,
        prompts=settings.prompts if settings is not None else None,
    )
    config = plan.config(
        cache=str(settings.cache) if settings is not None else None,
        cache_mode=settings.mode if settings is not None else None,
    )
    return dataclasses.replace(
        config, columns={}, metrics=metrics, data_rows=rows, data_sha256=data_sha256
    )
