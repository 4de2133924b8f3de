"""Shards: `--shard I/N` judges the rows whose number modulo N is I-1.

Round-robin by row number, not contiguous blocks: a shard does not depend on the number
of rows, and data sorted by topic or length spreads evenly over the shards. Shards never
overlap, their union is the whole input, and every row keeps its number in the input.
An input of conversations is split by conversation instead (`unit="conversation"`): a
shard judges the turns of the conversations whose record number modulo N is I-1, so a
turn and the earlier turns it rests on are judged in one process, once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.errors import JudgeError
from judge.run.folder import SHARD

if TYPE_CHECKING:
    from judge.run.rows import RowTally

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard `index` (from 1) of `count`."""

    index: int
    count: int
    unit: str = "row"  # or "conversation": what `holds` is given the number of

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise JudgeError(
                f"shard {self.index}/{self.count}: the shard number must be from 1 to "
                f"{self.count}, e.g. 1/{self.count} for the first"
                if self.count >= 1
                else f"shard {self.index}/{self.count}: the number of shards must be at least 1"
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, number: int) -> bool:
        """Whether the unit numbered `number` (from 0) is in this shard: an input row, or a
        conversation (its record's number in the input) for a shard by conversation."""
        return number % self.count == self.index - 1

    def size(self, rows: int) -> int:
        """How many of `rows` input rows a shard by row holds."""
        return len(range(self.index - 1, rows, self.count))

    def to_json(self) -> dict[str, Any]:
        """The shard as summary.json records it (the unit only when not rows)."""
        out: dict[str, Any] = {"index": self.index, "count": self.count}
        if self.unit != "row":
            out["unit"] = self.unit
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Shard:
        """The shard summary.json or shard.json recorded."""
        return cls(int(data["index"]), int(data["count"]), str(data.get("unit", "row")))


def parse_shard(spec: object) -> Shard:
    """A Shard from its text `I/N` (I from 1 to N), or the Shard itself."""
    if isinstance(spec, Shard):
        return spec
    match = _SPEC.fullmatch(spec) if isinstance(spec, str) else None
    if match is None:  # the keyword's words: the CLI shows them as --shard (judge.cli.words)
        raise JudgeError(
            f"shard={spec!r}: write it as I/N, the shard number and the number of shards, "
            "e.g. shard='1/4' for the first of four"
        )
    return Shard(int(match[1]), int(match[2]))


SHARD_FILE = SHARD


def write_shard_record(
    spec: Shard, run: str, tally: RowTally, path: Path, results_sha256: str
) -> None:
    """Write a finished shard's `shard.json` (to path): its run (fingerprint), its shard, the
    sha256 of its results.jsonl and the tally of its rows, which `judge merge` reads instead
    of parsing every row while the hash matches."""
    record = {
        "format": 1,
        "run": run,
        "shard": spec.to_json(),
        "results_sha256": results_sha256,
        "tally": tally.to_json(),
    }
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))  # NaN are null
    path.write_text(text + "\n", encoding="utf-8")
