"""The labels file of `judge annotate`: JSON lines, appended one at a time and synced to
disk before the page is answered, so that a server killed at any moment loses no label
it acknowledged. `judge estimate` reads it as it is; `judge annotate --export` turns it
into rows for `judge agreement`.

One record per key pressed on a row (the fields `judge estimate` reads first):

- `id`: the results row's id (as text), what joins the label to the run's row;
- `label`: 1 (yes), 0 (no), or null for a row skipped;
- `annotator` and `time` (UTC, ISO 8601);
- `sample`: how the rows were drawn, `{"method": "random", "seed": 7, "n": 50, "of": 400}`
  for a seeded random sample of n of the run's 400 rows, `"method": "disagreements"` for
  the judge's least sure rows first (not a random sample);
- `claims`: the person's verdict on each claim of the answer (true, false, or null where
  they left the judge's); `metric`, `row` (the row's line in results.jsonl, from 0),
  `position` (in the draw) and `results_sha256` (the run's results.jsonl the rows were
  drawn from: a later session must draw from the same).

The latest record of a person for a row wins. A line that cannot be read (the last one
cut off by a kill mid-write) is reported and left out; the lines before it all count.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError, OutputError
from judge.json_values import escape_surrogates
from judge.lines import bounded_lines

SAMPLE = "sample"


def now() -> str:
    """The time of a record: UTC, to the millisecond, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class LabelsLog:
    """A labels file as read: its records in file order, and the lines that could not be
    read (each said in words)."""

    labels: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cut_off: bool = False  # whether the last line is one cut off mid-write (among problems)

    def unreadable(self) -> int:
        """The lines that cannot be read, but a last line cut off mid-write."""
        return len(self.problems) - self.cut_off

    def latest(self, annotator: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        """(annotator, row id) -> that person's latest record of the row (of one annotator
        when given)."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for record in self.labels:
            if annotator is None or record["annotator"] == annotator:
                out[(record["annotator"], str(record["id"]))] = record
        return out

    def drawn(self) -> dict[str, Any] | None:
        """The first record that says how its rows were drawn: it fixes the draw."""
        return next((r for r in self.labels if isinstance(r.get(SAMPLE), dict)), None)

    def annotators(self) -> list[str]:
        """Everyone who labelled, sorted."""
        return sorted({record["annotator"] for record in self.labels})


def read_labels_file(path: str | os.PathLike[str]) -> LabelsLog:
    """Read a labels file (an absent one is empty); unreadable lines go to `problems`."""
    log = LabelsLog()
    where = Path(path)
    if not where.exists():
        return log
    try:
        with open(where, "rb") as handle:
            lines = list(bounded_lines(handle, where))
    except IsADirectoryError:
        raise InputFormatError(f"--labels {where} is a folder: give a file") from None
    for number, raw in lines:
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
            _check_label(record)
        except (ValueError, KeyError, TypeError) as exc:
            last = number == len(lines)
            cut = last and not raw.endswith(b"\n")
            log.cut_off = cut
            log.problems.append(
                f"{where} line {number} "
                + (
                    "was cut off mid-write (the server was stopped while writing it); that "
                    "one label is lost, the lines before it are kept"
                    if cut
                    else f"cannot be read ({exc}) and is left out"
                )
            )
            continue
        log.labels.append(record)
    return log


def _check_label(record: dict[str, Any]) -> None:
    """Raise ValueError unless a label record has what the readers use."""
    if not isinstance(record.get("annotator"), str):
        raise ValueError("no annotator")
    if record.get("id") in (None, ""):
        raise ValueError("no id")
    if record.get("label") not in (0, 1, None):
        raise ValueError(f"label {record.get('label')!r} is not 0, 1 or null")


class LabelsWriter:
    """Appends records to a labels file, each synced to disk before `append` returns."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        created = not self.path.exists()
        try:
            if self.path.parent != Path(""):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(
                f"cannot write the labels file {self.path}: {exc.strerror or exc}; give "
                "another --labels"
            ) from None
        stat = os.fstat(self._fd)
        self._inode = (stat.st_dev, stat.st_ino)
        if created:
            _sync_folder(self.path.parent)
        elif _ends_mid_line(self.path):
            # A line cut off by a kill: the next record starts on a line of its own.
            self._write(b"\n")

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one record as a line and sync it to disk."""
        try:
            stat = os.stat(self.path)
            same = (stat.st_dev, stat.st_ino) == self._inode
        except OSError:
            same = False
        if not same:
            # The open file is no longer the one on disk: a label written to it is lost.
            raise OutputError(
                f"the labels file {self.path} was deleted or replaced while labelling: this "
                "label is not kept, nor will any be; stop judge annotate and start it again "
                "(it goes on from the file as it is now)"
            )
        line = json.dumps(escape_surrogates(dict(record)), ensure_ascii=False, sort_keys=True)
        self._write(line.encode("utf-8") + b"\n")

    def _write(self, data: bytes) -> None:
        try:
            # One write of the whole line: O_APPEND puts it at the end in one piece even
            # when another annotator's server appends to the same file.
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"only {written} of {len(data)} bytes written")
            os.fsync(self._fd)
        except OSError as exc:
            raise OutputError(
                f"cannot write the labels file {self.path}: "
                f"{getattr(exc, 'strerror', None) or exc}; free some space and press the key "
                "again"
            ) from None

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def _ends_mid_line(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) != b"\n"


def _sync_folder(folder: Path) -> None:
    """Sync a folder, so that a file just made in it survives a power cut."""
    try:
        fd = os.open(folder if str(folder) else ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # not every file system syncs folders
    finally:
        os.close(fd)
