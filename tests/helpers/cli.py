"""`judge` run as a user runs it (a subprocess), on a small dataset of distinct rows, with
the flags of a `judge eval` against the fake server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from judge.testing import FakeLLMServer

from .cli_fork import run_judge, start

start()  # the forking servers import while the tests are collected


def run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    """`python -m judge ARGS`, output captured as text (forked from a warm interpreter)."""
    return run_judge([str(a) for a in args], **kwargs)


def rows(n: int) -> list[dict]:
    """n distinct samples: each row's question and answer name its number."""
    return [
        {
            "id": f"s{i}",
            "question": f"Who created Python? ({i})",
            "answer": f"Guido van Rossum created Python. Row {i} is here.",
            "contexts": ["Python was created by Guido van Rossum.", "Bananas are yellow."],
            "ground_truth": "Guido van Rossum created Python.",
        }
        for i in range(n)
    ]


def dataset(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(n)), encoding="utf-8")
    return path


def eval_args(data: Path, server: FakeLLMServer, tmp: Path, *extra: str) -> list[str]:
    return [
        "eval",
        str(data),
        "--model",
        "openai/judge",
        "--api-base",
        server.base_url,
        "--api-key",
        "sk-cli-secret-123456",
        "--cache",
        str(tmp / "cache.sqlite"),
        "--out",
        str(tmp / "out"),
        "--no-progress",
        *extra,
    ]
