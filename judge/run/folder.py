"""A run's folder: the one owner of the names of the files in it.

judge eval, judge merge, judge experiment and `EvaluationResult.write` write the same
folder; every reader (compare, merge, view, runs, the trace commands, the pytest report)
finds the files through this module, and reads results.jsonl back checked against the
sha256 its summary.json records.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError

# Every file a judge run writes into its output folder (`judge eval`, `judge experiment`,
# `judge merge`, a shard's): a file the run reads may not be one of them.
OUTPUT_NAMES = (
    "results.jsonl",
    "summary.json",
    "report.html",
    "shard.json",
    ".checkpoint.jsonl",
    "app_outputs.jsonl",
    "run.trec",
    "qrels.txt",
    "skipped.jsonl",
)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_results_hash(summary: Any, results_sha256: str, where: Path) -> None:
    """Refuse a results.jsonl that is not the one its summary.json was written with (a
    run stopped between publishing the two, or a file edited or cut short since). A
    summary of an older judge records no hash and is taken as it is."""
    recorded = summary.get("results_sha256") if isinstance(summary, dict) else None
    if recorded is not None and recorded != results_sha256:
        raise InputFormatError(
            f"{where}: results.jsonl is not the file its summary.json was written with "
            "(a run was stopped while writing its outputs, or the file was changed since); "
            "rerun the evaluation into this folder (it resumes from its checkpoint)"
        )
