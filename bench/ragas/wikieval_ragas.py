"""Score WikiEval pairs with RAGAS 0.4.3 in bench/.ragas-venv; started by bench/quality/wikieval.py.

Usage: wikieval_ragas.py JOBS.json CHAT_BASE_URL MODEL EMBED_BASE_URL EMBED_MODEL TIMEOUT OUT.jsonl
JOBS.json: [{"item", "aspect", "metric", "pair": [preferred sample, other sample]}]. For each job
one line is appended to OUT.jsonl as soon as both sides are scored: {"tool": "ragas", "item",
"aspect", "scores": [float | null, float | null], "errors": [str | null, ...], "requests",
"embed_requests", "seconds"}. Each side is its own one-row evaluate() with raise_exceptions,
so a failure is recorded with its message and the other side still counts.
"""

import json
import math
import sys
import time
import warnings

import httpx
from ragas import EvaluationDataset, RunConfig, evaluate
from ragas.metrics import ContextRelevance, answer_relevancy, faithfulness
from ragas_runner import openai_clients  # same directory: sets RAGAS's no-tracking first

warnings.filterwarnings("ignore", category=DeprecationWarning)

METRICS = {m.name: m for m in (faithfulness, answer_relevancy, ContextRelevance())}
REQUESTS = {"chat": 0, "embed": 0}  # requests sent, counted by an httpx hook on both clients


def _count(request: httpx.Request) -> None:
    path = request.url.path
    kind = "chat" if path.endswith("/chat/completions") else "embed" if "embed" in path else ""
    if kind:
        REQUESTS[kind] += 1


async def _acount(request: httpx.Request) -> None:
    _count(request)


def score(metric_name, sample, llm, embeddings, timeout):
    """One side's score and error message (None when it scored)."""
    dataset = EvaluationDataset.from_list(
        [
            {
                "user_input": sample["question"],
                "response": sample["answer"],
                "retrieved_contexts": sample["contexts"],
            }
        ]
    )
    try:
        result = evaluate(
            dataset,
            metrics=[METRICS[metric_name]],
            llm=llm,
            embeddings=embeddings,
            run_config=RunConfig(max_workers=1, timeout=int(float(timeout)), max_retries=2),
            raise_exceptions=True,
            show_progress=False,
        )
        value = float(result.to_pandas()[metric_name][0])
    except Exception as error:  # recorded per side, the run goes on
        return None, f"{type(error).__name__}: {error}"[:500]
    return (None, "NaN score") if math.isnan(value) else (value, None)


def main() -> None:
    jobs_path, base_url, model, embed_base, embed_model, timeout, out_path = sys.argv[1:8]
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    llm, embeddings = openai_clients(
        base_url,
        model,
        embed_base,
        embed_model,
        timeout=float(timeout),
        max_retries=2,
        http_client=httpx.Client(timeout=float(timeout), event_hooks={"request": [_count]}),
        http_async_client=httpx.AsyncClient(
            timeout=float(timeout), event_hooks={"request": [_acount]}
        ),
    )
    for job in jobs:
        start, before = time.perf_counter(), dict(REQUESTS)
        sides = [score(job["metric"], s, llm, embeddings, timeout) for s in job["pair"]]
        record = {
            "tool": "ragas",
            "item": job["item"],
            "aspect": job["aspect"],
            "scores": [v for v, _ in sides],
            "errors": [e for _, e in sides],
            "requests": REQUESTS["chat"] - before["chat"],
            "embed_requests": REQUESTS["embed"] - before["embed"],
            "seconds": time.perf_counter() - start,
        }
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
