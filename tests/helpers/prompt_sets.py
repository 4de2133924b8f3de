"""A prompt set whose verify.txt differs from the built-in's by one sentence, and the verify
prompts a fake server received: for the tests of `--prompts` and `--judge-prompts`."""

from __future__ import annotations

from pathlib import Path

from judge.metrics.prompts import prompts_dir
from judge.testing import FakeLLMServer

MARK = "Be strict: a claim merely close to a context is not_found."


def edited_verify(folder: Path, extra: str = MARK) -> Path:
    """A prompt set whose verify.txt is the built-in's with a sentence added to its system."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (prompts_dir() / "verify.txt").read_text(encoding="utf-8")
    # Added at the end: the heuristic judge knows a prompt by how its system message starts.
    text = text.replace("\n<<<user>>>", f"\n{extra}\n<<<user>>>", 1)
    (folder / "verify.txt").write_text(text, encoding="utf-8")
    return folder


def verify_systems(server: FakeLLMServer) -> list[str]:
    """The system messages of the verify requests the server received."""
    systems = [r.body["messages"][0]["content"] for r in server.requests if r.body]
    return [s for s in systems if "You check numbered claims" in s]
