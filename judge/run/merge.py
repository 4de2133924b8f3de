"""`judge merge`: the outputs of `judge eval --shard I/N` joined into the unsharded result.

The rows are joined in input order and the summary, bootstrap intervals and report are
computed from them by the same code as an unsharded run, so they are the same numbers.
Each shard's lines are copied as they are: judge wrote them as it writes an unsharded
run's results.jsonl. A finished shard also writes `shard.json`: the counts and scores of
its rows (`RowTally`) and the sha256 of its results.jsonl. While every shard's hash still
matches its file, the merge takes the counts from them instead of parsing every line again
(about three quarters of a merge's time); otherwise (a shard of an older judge, a file
edited since) every shard's lines are parsed and checked.
What cannot be the same is kept honest: `config.seconds`, `config.resumed_rows` and
`config.cache_damaged` are the sums over the shards (machine time, not wall time),
`usage` is the sum of the shards' usage, and `config.source`, `cache`, `cache_mode` and
`structured_output` (the mode the server ended up accepting) are shard 1's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import json
import os
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError
from judge.run.checkpoint import RowFile, scan_lines
from judge.run.config import RunConfig, run_notes
from judge.run.folder import RunFolder, check_results_hash, file_sha256
from judge.run.results import EvaluationResult
from judge.run.rows import ResultRow, RowTally
from judge.run.shard import Shard

# Settings every shard must share, in the order they are compared (the first difference
# found is the one reported); "run" covers the rest (servers, custom metric versions).
_SAME = ("metrics", "model", "embeddings", "prompts", "columns", "data", "run")


class ShardOutput:
    """One shard's output directory: its summary's config and its results file."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.dir = Path(directory)
        self.folder = RunFolder(self.dir)
        summary = self.folder.summary_file
        self.results = self.folder.results
        if not summary.is_file() or not self.results.is_file():
            raise InputFormatError(
                f"{self.dir}: no summary.json and results.jsonl; give the --out directory "
                "of a finished `judge eval ... --shard I/N` (a stopped shard resumes when "
                "rerun)"
            )
        data = json.loads(summary.read_text(encoding="utf-8"))
        self.results_sha256 = file_sha256(self.results)
        check_results_hash(data, self.results_sha256, self.dir)
        self.config: dict[str, Any] = data.get("config", {})
        self.usage: dict[str, Any] = data.get("usage", {})
        spec = self.config.get("shard")
        if not isinstance(spec, dict):
            raise InputFormatError(
                f"{self.dir}: not a shard (its summary.json config has no shard); it was "
                "run without --shard I/N"
            )
        self.shard = Shard.from_json(spec)

    def __str__(self) -> str:
        return f"shard {self.shard} ({self.dir})"

    def recorded_tally(self) -> dict[str, Any] | None:
        """The tally its `shard.json` records, if that file belongs to this shard's run and
        results.jsonl is still the file it was recorded from; else None."""
        try:
            record = json.loads(self.folder.shard_record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # none (written by an older judge), or unreadable: parse the rows
        if not isinstance(record, dict) or record.get("format") != 1:
            return None
        spec = self.shard.to_json()
        if record.get("run") != self.config.get("run") or record.get("shard") != spec:
            return None
        if record.get("results_sha256") != self.results_sha256:
            return None  # edited since: its lines are parsed and checked instead
        tally = record.get("tally")
        return tally if isinstance(tally, dict) else None

    def rows(self) -> Iterator[tuple[int, bytes, ResultRow]]:
        """(row number, line, row) of every row, checking each is in this shard and in
        input order."""
        last = -1
        for line_number, (_, line) in enumerate(scan_lines(self.results), start=1):
            try:
                data = json.loads(line)
                number = data["row"]
                row = ResultRow.from_json(data)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InputFormatError(
                    f"{self.results}:{line_number}: not a judge results row ({exc})"
                ) from None
            # A shard by conversation holds whole conversations, whatever their rows'
            # numbers: the rows are checked for order, and the merge for gaps.
            held = self.shard.unit == "conversation" or self.shard.holds(number)
            if not isinstance(number, int) or not held or number <= last:
                holds = (
                    "whole conversations"
                    if self.shard.unit == "conversation"
                    else f"rows numbered {self.shard.index - 1} modulo {self.shard.count}"
                )
                raise InputFormatError(
                    f"{self.results}:{line_number}: row {number} does not belong there "
                    f"(shard {self.shard} holds {holds}, in order); the file was edited or "
                    "mixed up"
                )
            last = number
            yield number, line if line.endswith(b"\n") else line + b"\n", row


def check_shards(shards: Sequence[ShardOutput]) -> None:
    """Refuse shards that do not make one whole run: a different count, a missing or
    repeated shard, different settings or data."""
    if not shards:
        raise InputFormatError("judge merge needs the output directories of the shards")
    first = shards[0]
    count = first.shard.count
    seen: dict[int, ShardOutput] = {}
    for shard in shards:
        if shard.shard.count != count:
            raise InputFormatError(
                f"{shard} and {first} split the rows differently ({shard.shard.count} and "
                f"{count} shards); run all shards with the same N in --shard I/N"
            )
        if shard.shard.index in seen:
            raise InputFormatError(
                f"shard {shard.shard} is given twice: {seen[shard.shard.index].dir} and "
                f"{shard.dir}; give each shard's output once"
            )
        seen[shard.shard.index] = shard
        for key in _SAME:
            mine, theirs = shard.config.get(key), first.config.get(key)
            if mine != theirs:
                raise InputFormatError(_difference(key, first, theirs, shard, mine))
    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in seen]
    if missing:
        raise InputFormatError(
            f"shard {', '.join(missing)} missing: give the output directories of all "
            f"{count} shards (judge eval DATA --shard I/{count} --out DIR for each I)"
        )


def _difference(key: str, a: ShardOutput, va: Any, b: ShardOutput, vb: Any) -> str:
    """What differs between two shards' settings, in words."""
    if key == "prompts" and isinstance(va, dict) and isinstance(vb, dict):
        changed = sorted(n for n in va.keys() | vb.keys() if va.get(n) != vb.get(n))
        parts = [f"{n} {va.get(n)!r} vs {vb.get(n)!r}" for n in changed]
        return (
            f"{a} and {b} were run with different prompt versions ({'; '.join(parts)}); "
            "rerun the shards with the same judge version and prompts"
        )
    if key == "run":
        return (
            f"{a} and {b} were run with different settings (run fingerprint {va} vs {vb}: "
            "the judge or embedding server, or a custom metric's version); rerun them alike"
        )
    if key == "data":
        return (
            f"{a} and {b} were run on different data ({va} vs {vb}); run every shard on "
            "the same file"
        )
    return f"{a} and {b} were run with different {key}: {va!r} vs {vb!r}; rerun them alike"


def sum_usage(usages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Usage summed over shards (or rows): a count or cost summed, unknown (None) if any is."""
    total: dict[str, Any] = {}
    for usage in usages:
        for key, value in usage.items():
            if key not in total:
                total[key] = value
            elif total[key] is None or value is None:
                total[key] = None
            else:
                total[key] += value
    return total


def merge_shards(
    shard_dirs: Sequence[str | os.PathLike[str]], rows_path: str | os.PathLike[str]
) -> EvaluationResult:
    """The unsharded result from the shards' output directories.

    Args:
        shard_dirs: the --out directories of `judge eval --shard I/N`, one per shard, in
            any order.
        rows_path: where the joined rows are written (the result reads them from there,
            lazily; delete it once done with the result).

    Raises:
        judge.errors.InputFormatError: a shard is missing, repeated, or run with other
            metrics, models, prompts, servers or data, or its results do not fit it.
    """
    shards = sorted((ShardOutput(d) for d in shard_dirs), key=lambda s: s.shard.index)
    check_shards(shards)
    first = shards[0].config
    total = int(first["data"]["rows"])
    metrics = list(first["metrics"])
    units = {s.shard.unit for s in shards}
    if len(units) > 1:
        raise InputFormatError(
            "the shards split the input differently (by row and by conversation): they "
            "were run by different versions of judge; rerun them with one"
        )
    # The recorded tallies interleave round-robin, as shards by row hold their rows; the
    # rows of shards by conversation are parsed and joined by their numbers instead.
    tally = _recorded_tally(shards, total) if units == {"row"} else None
    if tally is not None:
        offsets = _join_lines(shards, rows_path, total)
    else:
        tally, offsets = _join_parsed(shards, rows_path, metrics)
    if len(offsets) != total:
        raise InputFormatError(
            f"the shards hold {len(offsets)} rows, the input {total}; a shard's output is "
            "incomplete: rerun that shard"
        )
    config = dataclasses.replace(
        RunConfig.from_json(first),
        shard=None,
        resumed_rows=sum(int(s.config.get("resumed_rows", 0)) for s in shards),
        seconds=round(sum(float(s.config.get("seconds", 0.0)) for s in shards), 3),
        cache_damaged=sum(int(s.config.get("cache_damaged", 0)) for s in shards),
        # every shard's: a replay miss in shard 2's rows alone is noted as one process does
        notes=run_notes(*(s.config.get("notes") or [] for s in shards)),
    )
    rows = RowFile(rows_path, offsets, metrics=metrics, verbatim=True)
    usage = sum_usage([s.usage for s in shards])
    return EvaluationResult(rows, metrics, config, usage, tally=tally)


def _recorded_tally(shards: Sequence[ShardOutput], total: int) -> RowTally | None:
    """The tally of all rows from the shards' `shard.json` files; None unless every shard
    has a valid one for exactly its share of the `total` rows."""
    parts = []
    for shard in shards:
        part = shard.recorded_tally()
        if part is None:
            return None
        parts.append(part)
    try:
        tally = RowTally.interleave(parts)
    except Exception:  # any damage: the rows are parsed and checked instead
        return None
    metrics = list(shards[0].config.get("metrics", []))
    return tally if tally.rows == total and parts[0]["metrics"] == metrics else None


def _join_lines(
    shards: Sequence[ShardOutput], rows_path: str | os.PathLike[str], total: int
) -> array[int]:
    """Copy the shards' lines into rows_path in input order (shard r % N holds row r), as
    they are; returns where each row starts. Their tallies vouch for them (see
    `ShardOutput.recorded_tally`): the lines are not parsed."""
    offsets = array("q")  # 8 bytes a row; a list of ints held 36
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(s.results, "rb")) for s in shards]
        out = stack.enter_context(open(rows_path, "wb"))
        for number in range(total):
            shard = number % len(files)
            line = files[shard].readline()
            if not line:
                raise InputFormatError(
                    f"row {number} is in no shard's results.jsonl: {shards[shard]} "
                    "ends early; rerun that shard"
                )
            offsets.append(out.tell())
            out.write(line if line.endswith(b"\n") else line + b"\n")
        for output, f in zip(shards, files, strict=True):
            if f.readline():
                raise InputFormatError(
                    f"{output} holds more rows than its share of the input's {total}; "
                    "rerun that shard"
                )
    return offsets


def _join_parsed(
    shards: Sequence[ShardOutput], rows_path: str | os.PathLike[str], metrics: list[str]
) -> tuple[RowTally, array[int]]:
    """Copy the shards' lines into rows_path in input order, parsing and checking each
    one and tallying it; returns the tally and where each row starts."""
    offsets = array("q")  # 8 bytes a row; a list of ints held 36
    # The summary's counts are gathered as the rows go by, each line parsed once: the
    # lines are written as they are (judge wrote them, as it writes an unsharded run's).
    tally = RowTally(metrics)
    with open(rows_path, "wb") as out:
        # Each shard's file is in input order: a k-way merge holds one row per shard (by
        # row number alone: no two shards hold the same number).
        merged = heapq.merge(*(s.rows() for s in shards), key=lambda item: item[0])
        for number, line, row in merged:
            if number != len(offsets):
                raise InputFormatError(
                    f"row {len(offsets)} is in no shard's results.jsonl (the next is row "
                    f"{number}); a shard's output is incomplete: rerun that shard"
                )
            offsets.append(out.tell())
            out.write(line)
            tally.add(row)
    return tally, offsets
