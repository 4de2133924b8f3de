"""Runs and labels files shared by the tests of label-corrected runs and estimates
(tests/labels/)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from judge.run.rows import ResultRow
from tests.helpers.labels import row

# the heuristic judge calls every answer without an invented claim faithful (1; 2/3 with
# one of three invented); people call only the even rows' answers faithful: the judge is
# lenient, its mean ~0.94 against ~0.33 labelled
CLAIMS = [(3, 0), (2, 0), (2, 1), (1, 0), (3, 0), (2, 0)] * 10
SCORES = [s / (s + u) for s, u in CLAIMS]
PEOPLE = [int(u == 0 and i % 2 == 0) for i, (_, u) in enumerate(CLAIMS)]
CHOSEN = sorted(random.Random(5).sample(range(len(CLAIMS)), 30))
SAMPLE = {"method": "random", "seed": 5, "of": len(CLAIMS)}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def labels_file(path: Path, people: list[int] = PEOPLE, **fields: Any) -> Path:
    """People's labels of the CHOSEN rows, as judge annotate records them (`fields` replace
    or, as None, drop a field)."""
    records = []
    for i in CHOSEN:
        record = {"id": f"r{i}", "faithful": people[i], "annotator": "ana", "sample": SAMPLE}
        record.update({"metric": "faithfulness", **fields})
        records.append({k: v for k, v in record.items() if v is not None})
    return write_jsonl(path, records)


def data_file(tmp_path: Path) -> Path:
    """The data of 60 rows whose judged and labelled means differ."""
    return write_jsonl(tmp_path / "data.jsonl", [row(i, s, u) for i, (s, u) in enumerate(CLAIMS)])


def eval_command(data: Path, server: Any, out: Path, *extra: Any) -> list[Any]:
    return [
        "eval",
        data,
        "--metrics",
        "faithfulness",
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--cache",
        out.parent / "cache.sqlite",
        "--out",
        out,
        "--no-progress",
        *extra,
    ]


def write_run(
    folder: Path,
    scores: list[float],
    metric: str = "faithfulness",
    ids: list[Any] | None = None,
) -> Path:
    """A results.jsonl of rows r0, r1, ... (or `ids`) with one metric's scores."""
    folder.mkdir(exist_ok=True)
    lines = [
        ResultRow(row=i, id=f"r{i}" if ids is None else ids[i], scores={metric: s}).json_line()
        for i, s in enumerate(scores)
    ]
    path = folder / "results.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# the sample of the judge estimate tests' labels: 40 rows, seeded
RANDOM = {"method": "random", "seed": 7, "of": 40}


def scores_of(n: int) -> list[float]:
    """n judged scores on 0, 0.1, ..., 1, spread over the rows."""
    return [round((i * 7 % 11) / 10, 1) for i in range(n)]


def labels_for(rows: Iterable[int], scores: list[float], **fields: Any) -> list[dict[str, Any]]:
    """Labels that mostly agree with the scores: 1 at 0.5 and up, but row 3 the other way."""
    return [{"id": f"r{i}", "ok": int((scores[i] >= 0.5) != (i == 3)), **fields} for i in rows]
