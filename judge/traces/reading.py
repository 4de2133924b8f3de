"""The files `judge traces export` reads: a run's results.jsonl and the rows it judged."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError, JudgeError
from judge.run.folder import RunFolder
from judge.run.rows import ResultRow


def read_results(path: str | os.PathLike[str]) -> Iterator[ResultRow]:
    """The rows of a run's results.jsonl, one at a time.

    Args:
        path: a `judge eval` output folder (its results.jsonl) or a results.jsonl file.
    """
    folder = RunFolder.of(path)  # a run's folder: read back with its sha256 checked
    if not folder.results.is_file():
        raise JudgeError(
            f"{path}: no results.jsonl there; give the --out folder of `judge eval` (or "
            "`judge experiment`) or its results.jsonl"
        )
    for _, _, row in folder.rows():
        yield row


def read_rows(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The rows of a JSON-lines rows file (as `judge traces extract` writes), one at a time."""
    target = Path(path)
    for number, data in _json_lines(target):
        if not isinstance(data, dict):
            raise InputFormatError("a row must be a JSON object", path=str(target), line=number)
        yield data


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a JSON-lines file, parsed, with its line number (from 1)."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputFormatError(
                    f"not a JSON line ({exc}): give a JSON-lines file", path=str(path), line=number
                ) from None
