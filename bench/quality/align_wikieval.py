"""`judge align` on WikiEval: does a judge tuned on labelled rows agree better with people on
rows it was not tuned on?

Each WikiEval question gives two labelled rows for faithfulness, both against context_v1:
answer_stripped (label 1, the answer people found faithful) and ungrounded_answer (label
0). The rows are split by question (`group`: a question's two rows go to the same split, so
no held-out row shares its question and contexts with an example), stratified and seeded;
the judge's disagreements on the tune questions become few-shot examples, and every
candidate is measured on the held-out rows only. Prints before (the built-in prompt) and
after (each number of examples) with 95% bootstrap intervals, the paired difference and
whether it is within noise, and the judgments and prompt characters per row.

The data file is read where it is (its licence is unstated: never copy it into the
repository). The judge cache and the align output go to --work (gitignored).

Run (the local model; slow, a few minutes per question):
    python -m bench.quality.align_wikieval /work/shared/judge-quality/wikieval.jsonl \\
        --model openai/qwen --api-base http://127.0.0.1:8089/v1 [--limit 20] [--examples 2,4]
Against the loopback fake judge, to check the script in seconds:
    python -m bench.quality.align_wikieval FILE --fake --limit 6
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import judge
from judge.labels.align import MEASURED, AlignResult, align

HERE = Path(__file__).resolve().parent
WORK = HERE.parent / ".align-wikieval"  # gitignored: the judge cache and the align output


def labelled_rows(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two faithfulness rows per WikiEval item: the grounded answer (1), the ungrounded (0)."""
    rows = []
    for item in items:
        base = {
            "question": item["question_stripped"],  # never the prefixed one: it leaks the label
            "contexts": item["context_v1"],
            "item": item["id"],
        }
        rows.append({**base, "id": f"{item['id']}-grounded", "answer": item["answer_stripped"]})
        rows[-1]["label"] = 1
        rows.append({**base, "id": f"{item['id']}-ungrounded", "answer": item["ungrounded_answer"]})
        rows[-1]["label"] = 0
    return rows


def load(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The first `limit` items of the WikiEval file (all without a limit)."""
    if not path.is_file():
        sys.exit(f"{path} not found: give the path of wikieval.jsonl (see its README)")
    with path.open(encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    return items[:limit] if limit else items


def summary(result: AlignResult) -> dict[str, Any]:
    """Before and after on the held-out rows, as the lines printed and the JSON written."""
    out: dict[str, Any] = {
        "held_out_rows": len(result.split.held_out),
        "tune_rows": len(result.split.tune),
        "disagreements": len(result.disagreements),
        "chosen": result.chosen,
        "candidates": {},
    }
    for c in result.candidates:
        entry: dict[str, Any] = {
            m: [c.measures[m].value, c.measures[m].ci_low, c.measures[m].ci_high] for m in MEASURED
        }
        entry |= {
            "scored": c.scored,
            "judgments_per_row": c.judgments_per_row,
            "prompt_chars_per_row": c.prompt_chars_per_row,
            "requests_sent": c.requests,
        }
        if c.versus_built_in is not None:
            d = c.versus_built_in
            entry["versus_built_in"] = {
                "balanced_accuracy": [
                    d.balanced_accuracy.value,
                    d.balanced_accuracy.ci_low,
                    d.balanced_accuracy.ci_high,
                ],
                "p_value": d.p_value,
                "within_noise": d.within_noise,
            }
        out["candidates"][c.name] = entry
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="wikieval.jsonl (read in place, never copied)")
    parser.add_argument("--model", default="openai/qwen", help="litellm model name")
    parser.add_argument("--api-base", help="the chat server's /v1 URL")
    parser.add_argument("--api-key", default="x")
    parser.add_argument(
        "--fake", action="store_true", help="judge with the loopback fake (heuristic) judge"
    )
    parser.add_argument("--limit", type=int, help="the first N questions (default all 50)")
    parser.add_argument("--held-out", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", default="2,4", help="numbers of examples to try")
    parser.add_argument("--context-window", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    parser.add_argument("--structured-output", default="json_object_schema")
    parser.add_argument("--work", type=Path, default=WORK, help="cache and output directory")
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    args = parser.parse_args(argv)
    rows = labelled_rows(load(args.data, args.limit))
    examples = [int(k) for k in args.examples.split(",") if k.strip()]
    args.work.mkdir(parents=True, exist_ok=True)
    server = None
    if args.fake:
        from judge.testing import FakeLLMServer, heuristic_judge

        server = FakeLLMServer(chat=heuristic_judge).start()
        args.api_base, args.model = server.base_url, "openai/fake-judge"
    elif not args.api_base:
        sys.exit("give --api-base (the local model's server) or --fake")
    try:
        llm = judge.LLM(
            model=args.model,
            api_base=args.api_base,
            api_key=args.api_key,
            context_window=None if args.fake else args.context_window,
            timeout=args.timeout,
            max_retries=2,
            max_concurrency=4 if args.fake else 1,  # llama.cpp answers one at a time
            structured_output=args.structured_output,
        )
        result = align(
            rows,
            metric="faithfulness",
            label="label",
            group="item",
            llm=llm,
            out=args.work / ("fake" if args.fake else "out"),
            held_out=args.held_out,
            seed=args.seed,
            examples=examples,
            cache=args.work / ("fake-cache.sqlite" if args.fake else "judge-cache.sqlite"),
            progress=False,
        )
        requests = server.count() if server is not None else None
    finally:
        if server is not None:
            server.stop()
    print(result.table())
    shown = summary(result)
    shown["model"] = args.model
    shown["questions"] = len(rows) // 2
    if requests is not None:
        shown["fake_server_requests"] = requests
        print(f"\nrequests the fake server answered: {requests}")
    if args.json:
        args.json.write_text(json.dumps(shown, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
