"""Run the code blocks of the README and the docs as tests (Sybil, collected by the
repository's root conftest.py).

Each Markdown file is one namespace, run top to bottom in a fresh temporary directory that
holds a copy of `examples/` (so `examples/data.jsonl`, `examples/qrels.txt`, ... resolve as
they do from a checkout's root), with:

- the loopback OpenAI-compatible server of `judge.testing` answering with its heuristic
  judge and hashed embeddings, reached through `OPENAI_BASE_URL` (so `--model
  openai/gpt-4o-mini` needs no key and no network) and in place of any
  `http://localhost:PORT/v1` an example names for a local server;
- the datasets library kept offline, and this interpreter's `judge` first on PATH.

Blocks by fence language:
- `python`: executed in the file's namespace; `sh`: run with `bash -euo pipefail` in the
  file's directory, failing on a non-zero exit (its output is in the failure message);
- `json`, `toml`: parsed; `jsonl`: each line parsed; `text`, `csv`, `tsv`, `yaml`: shown
  only (output, data or configuration written out for the reader).
A block that cannot run here says why in a comment before it, which Sybil reads:
`<!-- skip: next "needs a real API key" -->`. tests/test_docs.py fails on any other fence
language, so no block escapes both.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli_fork import judge_forked_in_shells
from tests.helpers.experiments import check_experiment_folders

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
# Markdown files whose blocks run: the READMEs, CONTRIBUTING.md and the docs site.
DOC_GLOBS = ["README.md", "README.zh-CN.md", "CONTRIBUTING.md", "docs/**/*.md"]
# Sybil matches with PurePath.match, where ** is not recursive: one pattern per depth.
DOC_PATTERNS = [*DOC_GLOBS[:3], "docs/*.md", "docs/*/*.md", "docs/*/*/*.md"]
RUN_LANGUAGES = {"python", "sh"}
PARSED_LANGUAGES = {"json", "jsonl", "toml"}
SHOWN_LANGUAGES = {"text", "csv", "tsv", "yaml"}
LOCAL_SERVER = re.compile(r"http://(?:localhost|127\.0\.0\.1):\d+/v1")
SH_TIMEOUT = 300  # seconds for one shell block; a hung command must not hang the suite


def _server(example: Example) -> str:
    return str(example.namespace["__docs_server__"].base_url)


def _local(source: str, example: Example) -> str:
    """The block's text with every local server address pointed at the loopback server."""
    return LOCAL_SERVER.sub(_server(example), source)


def run_python(example: Example) -> None:
    """Execute a python block in its file's namespace."""
    source = "\n" * (example.line + example.parsed.line_offset) + _local(example.parsed, example)
    exec(compile(source, example.path, "exec", dont_inherit=True), example.namespace)
    example.namespace.pop("__builtins__", None)


def run_sh(example: Example) -> None:
    """Run a sh block with bash in its file's directory; fail on a non-zero exit. Its
    `judge` commands are forked from a warm server (tests/helpers/cli_fork.py)."""
    script = _local(example.parsed, example)
    with judge_forked_in_shells() as (env, fds):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=SH_TIMEOUT,
            check=False,
            env={**os.environ, **env},
            pass_fds=fds,
        )
    if done.returncode != 0:
        raise AssertionError(
            f"exit {done.returncode} from the sh block at line {example.line}:\n{script}\n"
            f"--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
        )


def check_data(example: Example) -> None:
    """Parse a json, jsonl or toml block: shown data must be valid data."""
    language, text = example.region.lexemes["arguments"].split()[0], str(example.parsed)
    if language == "json":
        json.loads(text)
    elif language == "jsonl":
        for line in text.splitlines():
            if line.strip():
                json.loads(line)
    else:
        tomllib.loads(text)


def _setup(namespace: dict[str, Any]) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="judge-docs-"))
    shutil.copytree(ROOT / "examples", workdir / "examples")
    server = FakeLLMServer(chat=heuristic_judge).start()
    env = _env(server, workdir)
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    namespace.update(
        __docs_server__=server,
        __docs_dir__=workdir,
        __docs_saved__=(os.getcwd(), saved_env),
    )
    os.chdir(workdir)


def _env(server: FakeLLMServer, workdir: Path) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-docs-test",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(workdir / "home"),
        "NO_COLOR": "1",
        # Runs recorded where the default puts them, in the temporary directory, whatever
        # JUDGE_RUNS the developer's shell has.
        "JUDGE_RUNS": str(workdir / ".judge" / "runs.sqlite"),
    }


def _teardown(namespace: dict[str, Any]) -> None:
    cwd, saved_env = namespace["__docs_saved__"]
    os.chdir(cwd)
    for key, value in saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    namespace["__docs_server__"].stop()
    try:  # the experiments a page ran: their summaries are what judge ir computes
        check_experiment_folders(namespace["__docs_dir__"])
    finally:
        shutil.rmtree(namespace["__docs_dir__"], ignore_errors=True)


def docs_sybil() -> Sybil:
    """The Sybil that collects and runs the code blocks of the README and the docs."""
    parsers: list[Any] = [
        SkipParser(),
        CodeBlockParser(language="python", evaluator=run_python),
        CodeBlockParser(language="sh", evaluator=run_sh),
        *(CodeBlockParser(language=lang, evaluator=check_data) for lang in PARSED_LANGUAGES),
    ]
    return Sybil(
        parsers=parsers,
        patterns=DOC_PATTERNS,
        path=str(ROOT),
        setup=_setup,
        teardown=_teardown,
    )


FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([^\s`]*)", re.MULTILINE)


def fence_languages(text: str) -> list[tuple[int, str]]:
    """The (line, language) of every opening code fence in a Markdown text."""
    found, closing = [], None
    for match in FENCE.finditer(text):
        fence, language = match.group(2), match.group(3)
        if closing is None:
            found.append((text.count("\n", 0, match.start()) + 1, language))
            closing = fence[0] * len(fence)
        elif fence.startswith(closing) and not language:
            closing = None
    return found


def doc_files() -> list[Path]:
    """The Markdown files whose code blocks the suite runs."""
    files: set[Path] = set()
    for pattern in DOC_GLOBS:
        files.update(ROOT.glob(pattern))
    return sorted(files)
