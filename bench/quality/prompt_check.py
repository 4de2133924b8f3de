"""A targeted check of the judge prompts on real model output: issue 12's failure cases.

`score` judges the own-made rows of fixtures/real/samples.json with a real model (chat) and
hashed bag-of-words embeddings from a loopback fake server (answer relevance's value is not
what is checked here; its noncommittal flag is), through a judge cache in --work, and
exports the cache as sorted JSONL. `audit` reads that export and counts, from the model's
raw replies (before judge drops anything):
- claims swapped (a claim drawn from the other text, not its own) or dropped (a text with
  facts but no claims), and claims drawn from neither text;
- verdicts and grades citing a context number that does not exist;
- reasons copied word for word from a prompt example (as the judges compare them);
- grade sequences equal to the prompt example's; context precision < 1 on the rows whose
  first context is unrelated; good answers marked noncommittal.

Run from the repository root (`python -m` puts the current folder first on sys.path, so
`judge` and its prompts come from there); for the baseline prompts, from the root of an
export of main (`mkdir /tmp/main && git archive main | tar -x -C /tmp/main`):
  python -m bench.quality.prompt_check score --model openai/qwen \
      --api-base http://127.0.0.1:8089/v1 --work /tmp/check-after \
      --export /tmp/check-after/replies.jsonl
  python -m bench.quality.prompt_check audit --replies /tmp/check-after/replies.jsonl \
      --results /tmp/check-after/results.json --prompts judge/prompts
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from judge.metrics.prompts import load_prompt, prompts_dir, reason_key

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[1] / "fixtures" / "real" / "samples.json"
METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]
MODEL_EMBED = "openai/embed-fixture"
CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
FRAGMENT = r"[\d\s:,.\-]+|[A-Z][a-z]+"  # a date, time or number alone, or one word


def score(args: argparse.Namespace) -> None:
    """Judge the rows with the real model; write results.json and the cache export."""
    import judge
    from judge.testing import FakeLLMServer

    samples = json.loads(args.samples.read_text(encoding="utf-8"))["samples"]
    args.work.mkdir(parents=True, exist_ok=True)
    llm = judge.LLM(
        model=args.model,
        api_base=args.api_base,
        api_key=args.api_key,
        context_window=4096,
        timeout=900.0,
        max_retries=2,
        max_concurrency=1,
        structured_output="json_object_schema",
        cache_as="judge-fixture",  # so the suite replays the export through a fake server
    )
    with (
        FakeLLMServer() as embed_server,
        judge.Cache(args.work / "cache.sqlite") as cache,
    ):
        embeddings = judge.Embeddings(
            model=MODEL_EMBED, api_base=embed_server.base_url, api_key="x", cache_as="judge-fixture"
        )
        rows = [
            {k: s[k] for k in ("id", "question", "answer", "contexts", "ground_truth")}
            for s in samples
        ]
        result = judge.evaluate(
            rows,
            metrics=args.metrics.split(","),
            llm=llm,
            embeddings=embeddings,
            cache=cache,
            concurrency=1,
            progress=False,
        )
        (args.work / "results.json").write_text(
            json.dumps([r.to_json() for r in result.rows], ensure_ascii=False, indent=1),
            encoding="utf-8",
        )
        cache.export_jsonl(args.export, reproducible=True)
    print(json.dumps(result.usage))


def example_reasons(prompt_files: Iterable[Path]) -> set[str]:
    """Every reason written in the prompt files' examples, as `reason_key`s: the judges'
    own test of a copied reason (`Prompt.example_reasons`)."""
    return {r for path in prompt_files for r in load_prompt(path).example_reasons}


def example_grades(prompts: Path) -> list[list[int]]:
    """The grade sequences of the context-relevance prompt's examples."""
    text = (prompts / "context_relevance.txt").read_text(encoding="utf-8")
    return [
        [int(g) for g in re.findall(r'"grade": (\d)', line)]
        for line in text.splitlines()
        if line.startswith('{"contexts"')
    ]


def example_verdicts(prompts: Path) -> list[str]:
    """The verdict sequence of the verify prompt's example."""
    lines = (prompts / "verify.txt").read_text(encoding="utf-8").splitlines()
    example = next(x for x in lines if x.startswith('{"verdicts"'))
    return re.findall(r'"verdict": "(\w+)"', example)


def _claims_of(entry: dict[str, Any], user: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(text, its claims) of a claims reply, in the old (texts) or new (one text) format."""
    reply = entry["response"]["choices"][0]
    if "texts" in user:
        return [(t, e["claims"]) for t, e in zip(user["texts"], reply["texts"], strict=True)]
    return [(user["text"], reply["claims"])]


def audit(args: argparse.Namespace) -> dict[str, Any]:
    """Count the failures in the exported replies (see the module docstring)."""
    from judge.metrics.overlap import drawn_from, share_in
    from judge.metrics.scorers import context_precision
    from judge.testing import data_blocks

    samples = {
        s["question"]: s for s in json.loads(args.samples.read_text(encoding="utf-8"))["samples"]
    }
    replies = args.replies
    if replies.suffix == ".sqlite":  # a cache still being written: export what it holds
        import judge

        replies = Path(tempfile.mkdtemp()) / "replies.jsonl"
        with judge.Cache(args.replies) as cache:
            cache.export_jsonl(replies, reproducible=True)
    entries = [json.loads(line) for line in replies.read_text(encoding="utf-8").splitlines()]
    copied_from = example_reasons(args.prompts.glob("*.txt"))
    example_seqs = example_grades(args.prompts)
    verdict_seq = example_verdicts(args.prompts)
    counts = {
        "chat_replies": 0,
        "claims": 0,
        "claims_swapped": 0,
        "claims_from_neither_text": 0,
        "texts": 0,
        "texts_dropped": 0,
        "verdicts": 0,
        "verdict_context_missing": 0,
        "verify_calls": 0,
        "verdict_sequences_equal_to_example_prefix": 0,
        "grades": 0,
        "grade_sequences_equal_to_example": 0,
        "reasons": 0,
        "reasons_copied": 0,
        "noncommittal_on_good_answers": 0,
        "date_fragments": 0,
        "chinese_in_replies_to_non_chinese_data": 0,
    }
    copied: list[str] = []
    precision: dict[str, float] = {}  # context precision of the unrelated-first rows
    for entry in entries:
        if entry["kind"] != "chat":
            continue
        counts["chat_replies"] += 1
        user = data_blocks(entry["request"]["messages"][-1]["content"])
        reply = entry["response"]["choices"][0]
        if not CJK.search(json.dumps(user, ensure_ascii=False)):
            counts["chinese_in_replies_to_non_chinese_data"] += bool(
                CJK.search(json.dumps(reply, ensure_ascii=False))
            )
        for item in reply.get("verdicts", []) + reply.get("contexts", []) + reply.get("checks", []):
            if isinstance(item, dict) and "reason" in item:
                counts["reasons"] += 1
                if reason_key(item["reason"]) in copied_from:
                    counts["reasons_copied"] += 1
                    copied.append(item["reason"])
        if entry["prompt"] == "claims":
            sample = samples[user["question"]]
            for text, claims in _claims_of(entry, user):
                own = "answer" if text == sample["answer"] else "ground_truth"
                other = sample["ground_truth" if own == "answer" else "answer"]
                counts["texts"] += 1
                counts["texts_dropped"] += not claims
                for claim in claims:
                    counts["claims"] += 1
                    counts["date_fragments"] += bool(re.fullmatch(FRAGMENT, claim))
                    if not drawn_from(claim, text, user["question"]):
                        if share_in(claim, other) > share_in(claim, text):
                            counts["claims_swapped"] += 1
                        else:
                            counts["claims_from_neither_text"] += 1
        elif entry["prompt"] == "verify":
            labels = [v["verdict"] for v in reply["verdicts"]]
            counts["verify_calls"] += 1
            counts["verdict_sequences_equal_to_example_prefix"] += (
                len(labels) >= 2 and labels == verdict_seq[: len(labels)]
            )
            for v in reply["verdicts"]:
                counts["verdicts"] += 1
                c = v.get("context")
                counts["verdict_context_missing"] += c is not None and not (
                    0 <= c < len(user["contexts"])
                )
        elif entry["prompt"] == "context_relevance":
            grades = [g["grade"] for g in reply["contexts"]]
            counts["grades"] += len(grades)
            counts["grade_sequences_equal_to_example"] += grades in example_seqs
            if samples[user["question"]]["unrelated_first"]:
                precision[samples[user["question"]]["id"]] = context_precision(
                    [g >= 2 for g in grades]
                )
        elif entry["prompt"] == "reverse_questions":
            counts["noncommittal_on_good_answers"] += bool(reply["noncommittal"])
    counts["unrelated_first_rows_graded"] = len(precision)
    counts["unrelated_first_precision_below_1"] = sum(p < 1.0 for p in precision.values())
    report = {"counts": counts, "copied_reasons": copied, "precision": precision}
    if args.results and args.results.exists():
        results = json.loads(args.results.read_text(encoding="utf-8"))
        report["scores"] = {r["id"]: r["scores"] for r in results}
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return report


def main() -> None:
    """Parse the command line and run `score` or `audit`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("score")
    run.add_argument("--model", required=True)
    run.add_argument("--api-base", required=True)
    run.add_argument("--api-key", default="x")
    run.add_argument("--work", type=Path, required=True)
    run.add_argument("--export", type=Path, required=True)
    run.add_argument("--metrics", default=",".join(METRICS))
    check = sub.add_parser("audit")
    check.add_argument(
        "--replies", type=Path, required=True, help="the exported JSONL, or a cache.sqlite"
    )
    check.add_argument("--results", type=Path, help="results.json of the run, if it finished")
    check.add_argument("--prompts", type=Path, default=prompts_dir())
    for p in (run, check):
        p.add_argument("--samples", type=Path, default=SAMPLES)
    args = parser.parse_args()
    score(args) if args.command == "score" else audit(args)


if __name__ == "__main__":
    main()
