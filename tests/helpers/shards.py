"""The data and flags of the `judge eval` runs that tests/run/test_shards.py splits into
shards: rows sharing no request, with a row lacking contexts every fourth and one bad row;
and a report.html without the fields a split run cannot share."""

from __future__ import annotations

import json
import re
from pathlib import Path


def rows(n: int) -> list[dict]:
    """n samples sharing no request (so per-row usage is the same in any split), with a
    row lacking contexts every fourth and one bad row, so reasons and errors are counted."""
    out: list[dict] = [
        {
            "id": f"s{i}",
            "question": f"Who made tool {i}?",
            "answer": f"Ann made tool {i}." + (f" Tool {i} is fast." if i % 3 else ""),
            "contexts": [f"Tool {i} was made by Ann.", f"Tool {i} is slow."] if i % 4 else [],
            "ground_truth": f"Ann made tool {i} in {1990 + i}.",
        }
        for i in range(n)
    ]
    if n > 5:
        out[5] = {"answer": "no question here"}
    return out


def write_data(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(n)), encoding="utf-8")
    return path


def eval_args(data: Path, base_url: str, cache: Path, out: Path, *extra: object) -> list[object]:
    return [
        "eval",
        data,
        "--model",
        "openai/judge",
        "--api-base",
        base_url,
        "--api-key",
        "k",
        "--cache",
        cache,
        "--out",
        out,
        "--no-progress",
        # row 5 is unreadable on purpose (see rows()): up to a quarter of a shard's rows
        "--max-error-rate",
        "0.5",
        *extra,
    ]


def report_without_timing(text: str) -> str:
    """report.html (or summary.json) without config.seconds and config.cache."""
    text = re.sub(r'(&quot;|")seconds(&quot;|"): [0-9.]+', "SECONDS", text)
    return re.sub(r"&quot;cache&quot;: &quot;[^&]*&quot;", "CACHE", text)
