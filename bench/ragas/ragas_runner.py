"""Run RAGAS on samples against an OpenAI-compatible server; runs inside bench/.ragas-venv.

Usage: ragas_runner.py SAMPLES.json BASE_URL CONCURRENCY OUT.json
Writes {"version", "import_s", "eval_s", "scores": {metric: [float | null, ...]}} to OUT.json.
Started by bench/ragas/vs_ragas.py; not part of the judge package (RAGAS is not a dependency).
"""

import time

START = time.perf_counter()

import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # no usage analytics: traffic stays on 127.0.0.1
os.environ["LANGCHAIN_TRACING_V2"] = "false"
warnings.filterwarnings("ignore", category=DeprecationWarning)

import ragas  # noqa: E402
from langchain_openai import ChatOpenAI, OpenAIEmbeddings  # noqa: E402
from ragas import EvaluationDataset, RunConfig, evaluate  # noqa: E402
from ragas.embeddings import LangchainEmbeddingsWrapper  # noqa: E402
from ragas.llms import LangchainLLMWrapper  # noqa: E402
from ragas.metrics import (  # noqa: E402
    answer_relevancy,  # ResponseRelevancy, strictness 3
    context_precision,  # LLMContextPrecisionWithReference
    context_recall,  # LLMContextRecall
    faithfulness,
)

METRICS = [faithfulness, answer_relevancy, context_precision, context_recall]


def openai_clients(
    base_url: str, model: str, embed_base_url: str, embed_model: str, **http: object
) -> tuple[LangchainLLMWrapper, LangchainEmbeddingsWrapper]:
    """RAGAS's LLM and embeddings on OpenAI-compatible servers.

    `http` (timeout, max_retries, http_client, http_async_client) goes to both clients.
    """
    llm = ChatOpenAI(model=model, base_url=base_url, api_key="x", **http)
    # No tiktoken: its encoding files would be downloaded, and the servers need no chunking.
    embed = OpenAIEmbeddings(
        model=embed_model,
        base_url=embed_base_url,
        api_key="x",
        check_embedding_ctx_length=False,
        **http,
    )
    return LangchainLLMWrapper(llm), LangchainEmbeddingsWrapper(embed)


def main() -> None:
    samples_path, base_url, concurrency, out_path = sys.argv[1:5]
    imported = time.perf_counter()
    with open(samples_path, encoding="utf-8") as f:
        samples = json.load(f)
    dataset = EvaluationDataset.from_list(
        [
            {
                "user_input": s["question"],
                "response": s["answer"],
                "retrieved_contexts": s["contexts"],
                "reference": s["ground_truth"],
            }
            for s in samples
        ]
    )
    llm, embeddings = openai_clients(base_url, "bench-ragas", base_url, "bench-embed")
    result = evaluate(
        dataset,
        metrics=METRICS,
        llm=llm,
        embeddings=embeddings,
        run_config=RunConfig(max_workers=int(concurrency)),
        show_progress=False,
    )
    done = time.perf_counter()
    frame = result.to_pandas()
    scores = {m.name: [None if math.isnan(v) else float(v) for v in frame[m.name]] for m in METRICS}
    report = {
        "version": ragas.__version__,
        "import_s": imported - START,
        "eval_s": done - imported,
        "scores": scores,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
