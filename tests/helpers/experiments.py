"""The invariant of every experiment folder: the retrieval metrics its summary.json reports
are what `judge ir` computes on the folder's own qrels.txt and run.trec.

What the two average over, by definition: the summary scores every question that has
relevance labels and an answer from the app (no app error); an answer without retrieved
ids scores 0. `judge ir` averages over every query of qrels.txt, a query without a run line
scoring 0 (trec_eval -c). The experiment writes into qrels.txt the labels of exactly the
questions its summary scored, so the two means are over the same questions.
`tests/conftest.py` checks every folder a test leaves under its `tmp_path`.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from judge.errors import CoverageWarning, UnknownMetricError
from judge.ir.evaluate import result_of, score_queries
from judge.ir.measure_names import parse_measure


def retrieval_metrics(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The summary's retrieval metrics (names `judge ir` computes) and their figures."""
    found = {}
    for name, figures in summary.get("metrics", {}).items():
        try:
            parse_measure(name)
        except UnknownMetricError:
            continue  # an LLM-judged metric
        found[name] = figures
    return found


def is_experiment(folder: Path) -> bool:
    """Whether the folder holds an experiment's outputs: its app_outputs.jsonl, and a
    summary.json that records the app."""
    if not (folder / "app_outputs.jsonl").is_file():
        return False
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and bool(summary.get("config", {}).get("app"))


def assert_summary_is_judge_ir(folder: Path) -> None:
    """Every retrieval metric of the folder's summary.json equals `judge ir` (the library
    function the command uses) on the folder's qrels.txt and run.trec, and is over as
    many questions as judge ir has queries."""
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    metrics = retrieval_metrics(summary)
    scored = {name: figures["scored"] for name, figures in metrics.items()}
    qrels, run = folder / "qrels.txt", folder / "run.trec"
    if metrics and not any(scored.values()):  # no question scored: no labels written
        assert not qrels.exists(), f"{folder}: qrels.txt holds labels the summary never scored"
        return
    if not metrics:
        return  # LLM-judged metrics alone: nothing to compare
    assert qrels.is_file() and run.is_file(), (
        f"{folder}: the summary scores retrieval metrics {scored} but the folder has "
        f"{'no qrels.txt' if not qrels.is_file() else 'no run.trec'}"
    )
    scores = score_queries(qrels, run, list(metrics))
    with warnings.catch_warnings():  # labelled questions without retrieved ids: scored 0
        warnings.simplefilter("ignore", CoverageWarning)
        means = result_of(scores)
    for name, figures in metrics.items():
        assert figures["scored"] == len(scores.qids), (
            f"{folder}: {name} scored over {figures['scored']} questions in summary.json, "
            f"judge ir has {len(scores.qids)} queries"
        )
        # Equal but for the order of summation (numpy's mean against judge ir's fsum).
        assert math.isclose(figures["mean"], means[name], rel_tol=1e-12, abs_tol=1e-12), (
            f"{folder}: {name} is {figures['mean']} in summary.json, "
            f"{means[name]} by judge ir on qrels.txt and run.trec"
        )


def check_experiment_folders(root: Path) -> list[Path]:
    """`assert_summary_is_judge_ir` on every experiment folder under `root`; the folders."""
    folders = sorted(p.parent for p in root.rglob("summary.json") if is_experiment(p.parent))
    for folder in folders:
        assert_summary_is_judge_ir(folder)
    return folders
