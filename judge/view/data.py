"""The viewer's data: the run history's records, in time order, with each run's rows as
its results.jsonl holds them (id, question, answer, scores), read once when the view is
built so that the page needs nothing but its own folder."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError, JudgeError
from judge.json_values import nan_to_null
from judge.run.folder import RunChangedError, RunFolder

# An answer longer than this is cut in the page's data: the drill-down shows answers side
# by side, and a run of long answers would otherwise make data.js as big as results.jsonl.
MAX_ANSWER_CHARS = 4000
# The same for a question (a question is matched whole before it is cut).
MAX_QUESTION_CHARS = 1000

# A context of a conversation's turn, and a claim, longer than these are cut (the
# conversation drill-down shows them; other rows carry neither).
MAX_CONTEXT_CHARS = 2000
MAX_CLAIM_CHARS = 1000

# What each run of the page says about itself (the record's keys, flattened for the table).
RUN_KEYS = ("id", "name", "created", "command", "model", "data", "rows", "tags", "baseline")


def view_data(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The page's data (`window.JUDGE_VIEW`) from run records (`RunRecord.to_dict()`).

    Args:
        records: the runs, in any order; each a mapping with at least `id`. A run whose
            `out_dir` is gone, or holds no readable results.jsonl, stays in the charts
            and the table; its `results` say why it has no rows.

    Returns:
        {"metrics": [...], "runs": [...], "baseline": id or None, "results": {id: ...}}:
        runs in time order (then id), metrics in the order the runs first name them.
    """
    runs = [_run(record, at) for at, record in enumerate(records)]
    seen: set[str] = set()
    for run in runs:
        if run["id"] in seen:
            raise InputFormatError(f"run {run['id']} is given twice; give each run once")
        seen.add(run["id"])
    runs.sort(key=lambda run: (run["created"] or "", run["id"]))
    metrics: dict[str, None] = {}  # an ordered set
    for run in runs:
        metrics.update(dict.fromkeys([*run["metrics"], *run["summary"]]))
    baselines = [run["id"] for run in runs if run["baseline"]]
    return {
        "metrics": list(metrics),
        "runs": runs,
        # One baseline is pinned at a time; were several marked, the latest one counts.
        "baseline": baselines[-1] if baselines else None,
        "results": {
            run["id"]: run_results(run["out_dir"], run.pop("results_sha256")) for run in runs
        },
    }


def _run(record: Mapping[str, Any], at: int) -> dict[str, Any]:
    """One record as the page shows it: the table's cells and the charts' numbers."""
    if not isinstance(record, Mapping) or not record.get("id"):
        raise InputFormatError(
            f"run record {at + 1} has no id: give records as `judge runs list --json` writes them"
        )
    run = {key: record.get(key) for key in RUN_KEYS}
    run["id"] = str(record["id"])
    run["baseline"] = bool(record.get("baseline"))
    run["tags"] = [str(tag) for tag in record.get("tags") or []]
    run["metrics"] = [str(m) for m in record.get("metrics") or []]
    run["out_dir"] = str(record["out_dir"]) if record.get("out_dir") else None
    recorded = record.get("results_sha256")
    run["results_sha256"] = recorded if isinstance(recorded, str) else None
    app = record.get("app") or {}
    run["app"] = app.get("target") if isinstance(app, Mapping) else None
    git = record.get("git") or {}
    commit = git.get("commit") if isinstance(git, Mapping) else None
    run["git"] = {"commit": str(commit)[:8], "dirty": bool(git.get("dirty"))} if commit else None
    summary = record.get("summary") or {}
    run["summary"] = {
        str(metric): {
            key: finite_number(values.get(key)) for key in ("mean", "ci_low", "ci_high", "scored")
        }
        for metric, values in summary.items()
        if isinstance(values, Mapping)
    }
    return run


def finite_number(value: Any) -> float | None:
    """A summary's number, or None when it is missing or undefined (NaN, null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return None if math.isnan(value) or math.isinf(value) else value
    except OverflowError:  # an integer past a float's range: no number a page can draw
        return None


def run_results(out_dir: str | None, results_sha256: str | None = None) -> dict[str, Any]:
    """One run's rows for the drill-down, or why there are none.

    Args:
        out_dir: the run's output folder.
        results_sha256: the hash of the results.jsonl the run wrote, as recorded; None when
            the record has none (an older judge's): the rows are shown, unverified.

    Returns:
        {"status": "ok", "rows": [...], "skipped": n, "verified": bool} with each row's
        id, question, answer, scores (null when undefined) and the reasons of its
        undefined scores (a conversation's turn also its conversation_id, turn, contexts
        and claims with their verdicts and sources, for the conversation drill-down);
        rows that could not be evaluated at all (an `error`) are skipped and counted;
        verified says whether the file is the one the run wrote. Else
        {"status": "missing", "unreadable" or "changed", "message": why}: "changed" when
        the folder's results.jsonl is not the run's (a later run wrote into the folder).
    """
    if out_dir is None:
        return {"status": "missing", "message": "the run recorded no output folder"}
    folder = Path(out_dir)
    if not folder.is_dir():
        return {"status": "missing", "message": f"the run's folder {folder} is gone"}
    run = RunFolder(folder)
    path = run.results
    if not path.is_file():
        return {"status": "missing", "message": f"the run's folder {folder} has no results.jsonl"}
    rows: list[dict[str, Any]] = []
    skipped = 0
    error: Exception | None = None
    try:
        # line by line (the file may be large), checked against the recorded sha256, else
        # the one its summary.json records
        for number, (_, raw) in enumerate(run.lines(results_sha256), 1):
            if error is not None or not raw.strip():
                continue  # a file that is not the run's is hashed whole all the same
            try:
                row = _row(raw.decode("utf-8"), path, number)
            except (InputFormatError, UnicodeDecodeError) as exc:
                error = exc
                continue
            if row is None:
                skipped += 1
            else:
                rows.append(row)
    except RunChangedError as exc:
        return {
            "status": "changed",
            "message": f"folder changed since recorded: {path} is not the file this run "
            "wrote (a later run was given the same output folder, or the file was edited); "
            f"its rows are not shown: {exc}",
        }
    except (OSError, JudgeError) as exc:
        return {"status": "unreadable", "message": f"{exc}"}
    if error is not None:
        return {"status": "unreadable", "message": f"{error}"}
    return {
        "status": "ok",
        "rows": rows,
        "skipped": skipped,
        "verified": results_sha256 is not None,
    }


def _row(line: str, path: Path, number: int) -> dict[str, Any] | None:
    """A results.jsonl line as the drill-down needs it; None for a row that has no scores
    because its input could not be read (its `error`)."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise InputFormatError(f"not JSON ({exc})", path=str(path), line=number) from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise InputFormatError("not a judge results row (no scores)", path=str(path), line=number)
    if data.get("error"):
        return None
    scores = {str(m): finite_number(v) for m, v in data["scores"].items()}
    reasons = data.get("reasons") or {}
    row_id = data.get("id")
    question = data.get("question")
    out = {
        "id": None if row_id is None else str(row_id),
        "question": cut_text(question, MAX_QUESTION_CHARS),
        "answer": cut_text(data.get("answer"), MAX_ANSWER_CHARS),
        "scores": scores,
        "reasons": {m: str(reasons[m]) for m, v in scores.items() if v is None and m in reasons},
    }
    if out["question"] != question and question is not None:
        out["question_key"] = str(question)  # a cut question still matches its twin whole
    if _id_like(data.get("conversation_id")):
        out.update(_turn_fields(data))
    return out


def _id_like(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _turn_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """What the conversation drill-down shows of a turn's row beside the others' fields:
    its conversation and turn, its contexts, and each answer claim with its verdict and
    source (a context, or a message of the conversation before it)."""
    turn = data.get("turn")
    contexts = data.get("contexts")
    evidence = data.get("evidence")
    evidence = evidence if isinstance(evidence, Mapping) else {}
    return {
        "conversation_id": str(data["conversation_id"]),
        "turn": turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
        "contexts": [
            cut_text(c, MAX_CONTEXT_CHARS) for c in (contexts if isinstance(contexts, list) else [])
        ],
        "claims": answer_claims(evidence),
    }


def answer_claims(evidence: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The answer's claims as judged: text, verdict, reason and source (`contexts` with
    the context's number from 1, `history` with the message's turn and role, or None)."""
    claims = evidence.get("answer_claims")
    verdicts = evidence.get("answer_verdicts")
    if not isinstance(claims, list):
        return []
    out = []
    for verdict in verdicts if isinstance(verdicts, list) else []:
        if not isinstance(verdict, Mapping):
            continue
        given = verdict.get("claim")
        index = given if isinstance(given, int) and not isinstance(given, bool) else -1
        known = 0 <= index < len(claims)
        context, turn, role = verdict.get("context"), verdict.get("turn"), verdict.get("role")
        source: dict[str, Any] | None = None
        if verdict.get("source") == "history" and isinstance(turn, int) and isinstance(role, str):
            source = {"source": "history", "turn": turn, "role": role}
        elif isinstance(context, int) and not isinstance(context, bool):
            source = {"source": "contexts", "context": context + 1}
        out.append(
            {
                "number": index + 1 if known else None,
                "claim": cut_text(claims[index], MAX_CLAIM_CHARS) if known else None,
                "verdict": str(verdict.get("verdict") or ""),
                "reason": cut_text(verdict.get("reason"), MAX_CLAIM_CHARS),
                **(source or {"source": None}),
            }
        )
    return out


def cut_text(text: Any, limit: int) -> str | None:
    """Text cut at `limit` characters, with a mark saying so; None stays None."""
    if text is None:
        return None
    whole = str(text)
    return whole if len(whole) <= limit else whole[:limit] + f" […cut at {limit} characters]"


def data_script(data: Mapping[str, Any], name: str = "JUDGE_VIEW") -> str:
    """data.js: `window.JUDGE_VIEW = {...};` (or another `name`), loaded with a script tag
    (file:// forbids fetching files), every `<`, `>`, `&` and line separator written as a
    \\u escape so that no text of the data can end a script or be read as markup."""
    text = json.dumps(nan_to_null(data), ensure_ascii=False, allow_nan=False, indent=None)
    for char in ("<", ">", "&", "\u2028", "\u2029"):
        text = text.replace(char, f"\\u{ord(char):04x}")
    return f"window.{name} = {text};\n"
