"""`judge demo`: the shipped demo dataset, scored offline from recorded judgments."""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

from judge.cli.finish import finish_run
from judge.errors import JudgeError
from judge.formatting import counted

# The demo: hand-judged samples and their recorded judgments (judge/demo/).
DEMO_MODEL = "openai/judge-fixture"
DEMO_EMBEDDINGS = "openai/embed-fixture"
DEMO_METRICS = [
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
    "context_relevance",
    "context_ndcg@5",
]

# What summary.json and report.html say of the demo's cache, deleted after the run.
TEMPORARY_CACHE = "a temporary cache (deleted after the run)"


def demo_dir() -> Path:
    """The demo data's folder (samples.json, judgments.jsonl): the package's data judge/demo
    (importlib.resources), the same in a source checkout and in an installed wheel."""
    from importlib import resources  # imported here: only this lookup needs it

    folder = resources.files("judge") / "demo"
    if isinstance(folder, Path) and (folder / "samples.json").is_file():
        return folder
    raise JudgeError(
        f"the demo data is missing (looked in {folder}): reinstall judge "
        "(pip install --force-reinstall judge); judge must be installed as files, not zipped"
    )


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the demo subcommand."""
    d = sub.add_parser(
        "demo",
        help="evaluate the shipped demo dataset from recorded judgments (offline)",
        description="Evaluate the 24 shipped demo samples with the LLM metrics, replaying "
        "the recorded judgments: no model, no key, no network. Writes results.jsonl, "
        "summary.json and report.html to --out, as judge eval does.",
    )
    d.add_argument("--out", default="judge-demo", help="output directory (default judge-demo)")
    d.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """The `judge demo` command: the demo dataset, replayed offline from recorded judgments."""
    from judge.cache.store import Cache
    from judge.llm.config import LLM, Embeddings
    from judge.run.evaluate import evaluate
    from judge.run.gates import Gates
    from judge.testing.fixtures import FIXTURE_SERVER

    source = demo_dir()
    spec = json.loads((source / "samples.json").read_text(encoding="utf-8"))
    fields = ("id", "question", "answer", "contexts", "ground_truth")
    rows = [{f: sample.get(f) for f in fields} for sample in spec["samples"]]
    print(
        f"judge demo: {counted(len(rows), 'sample')} from {source}, judged offline from recorded "
        f"judgments ({DEMO_MODEL}); no network is used. The judgments were written by hand;\n"
        "the embeddings are a bag-of-words stand-in (judge.testing.hashed_embedding), so\n"
        "answer_relevancy reads lower than with a real embedding model.\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(Path(tmp) / "demo.sqlite")
        cache.import_jsonl(source / "judgments.jsonl")
        cache.mode = "replay"  # every judgment comes from the recording, or it is an error
        try:
            result = evaluate(
                rows,
                metrics=DEMO_METRICS,
                # the recording's server identity: no server is reached, none is named
                llm=LLM(DEMO_MODEL, cache_as=FIXTURE_SERVER),
                embeddings=Embeddings(DEMO_EMBEDDINGS, cache_as=FIXTURE_SERVER),
                cache=cache,
                progress=False,
            )
        finally:
            cache.close()
    result.config = dataclasses.replace(
        result.config,
        source=f"judge demo ({source.name}/samples.json)",
        cache=TEMPORARY_CACHE,  # not the path: it is gone once the run ends
    )
    return finish_run(result, Path(args.out), Gates())
