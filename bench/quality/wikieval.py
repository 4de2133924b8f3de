"""The RAGAS paper's WikiEval benchmark: judge and RAGAS side by side on human preferences.

For each of the first N WikiEval questions and each aspect, both sides of a pair are scored
and the side people prefer should score higher (Es et al. 2023, Table 1):
- faithfulness: answer_stripped vs ungrounded_answer, both on context_v1 (judge
  `faithfulness`, RAGAS `faithfulness`);
- answer relevance: answer_stripped vs poor_answer (judge `answer_relevancy`, RAGAS
  `answer_relevancy`; both embed with all-MiniLM-L6-v2 served locally, see
  bench/support/embedder.py);
- context relevance: context_v1 vs context_v2 for the question (judge `context_relevance`,
  the share of contexts graded relevant: context_v2 is context_v1 plus added text, so a
  rank-weighted `context_precision` cannot fall when the added passages come after the
  relevant one; RAGAS `nv_context_relevance`, its successor of the paper's metric); and the
  same pairs by judge `context_focus`, the share of the context's sentences needed (the
  paper's own context relevance, judged sentence by sentence), compared with the same
  RAGAS outcomes.
Accuracy counts a tie as 0.5; the two tools are compared on the items both scored (exact
sign test on the items where their outcomes differ).

The data is read from ../shared/judge-quality/wikieval.jsonl (its licence is unstated: it is
never copied into the repository). judge runs in this process through a judge cache; RAGAS
runs in bench/.ragas-venv through bench/ragas/wikieval_ragas.py. Every finished (tool, item,
aspect) is appended to bench/.wikieval/runs.jsonl, so an interrupted run resumes where it
stopped and a rerun only prints the table.

Run: python -m bench.quality.wikieval --model openai/qwen --api-base http://127.0.0.1:8089/v1
     [--n 12] [--tools judge,ragas] [--context-window 4096] [--json bench/results/wikieval.json]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import judge
from bench.ragas.vs_ragas import ragas_python
from bench.support.embedder import MODEL as EMBED_MODEL
from bench.support.embedder import LocalEmbedder
from judge.labels.kinds import pairwise
from judge.labels.measures import sign_test
from judge.metrics.judges import context_sentences
from judge.metrics.overlap import shares_content

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / "shared" / "judge-quality" / "wikieval.jsonl"
WORK = HERE.parent / ".wikieval"  # gitignored: the judge cache and the resumable run log
# aspect -> (judge metric, RAGAS metric, the paper's RAGAS accuracy with gpt-3.5-turbo)
ASPECTS = {
    "faithfulness": ("faithfulness", "faithfulness", 0.95),
    # the same pairs, judge's named-terms check on top; its calls are faithfulness's (cached),
    # and RAGAS's outcomes are its faithfulness ones (not run twice)
    "faithfulness_strict": ("faithfulness_strict", "faithfulness", 0.95),
    "answer_relevance": ("answer_relevancy", "answer_relevancy", 0.78),
    "context_relevance": ("context_relevance", "nv_context_relevance", 0.70),
    # the same pairs, judged by sentence: the share of the context's sentences needed
    "context_focus": ("context_focus", "nv_context_relevance", 0.70),
}
# judge-only aspects -> the aspect whose RAGAS outcomes their row compares with (RAGAS has
# one metric for both; it is not run twice)
RAGAS_SHARED = {"faithfulness_strict": "faithfulness", "context_focus": "context_relevance"}


def pair(item: dict[str, Any], aspect: str) -> list[dict[str, Any]]:
    """The two samples of one item's pair for an aspect, the preferred one first."""
    q, good, v1 = item["question_stripped"], item["answer_stripped"], item["context_v1"]
    base = {"question": q, "answer": good, "contexts": v1}
    if aspect.startswith("faithfulness"):
        return [base, {**base, "answer": item["ungrounded_answer"]}]
    if aspect == "answer_relevance":
        return [base, {**base, "answer": item["poor_answer"]}]
    return [base, {**base, "contexts": item["context_v2"]}]


def load(n: int) -> list[dict[str, Any]]:
    """The first n WikiEval items."""
    if not DATA.exists():
        sys.exit(f"{DATA} not found: the benchmark reads WikiEval from ../shared/judge-quality/")
    with DATA.open(encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    return items[:n]


def _real(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def run_judge(
    args: argparse.Namespace, todo: list[tuple[dict[str, Any], str]], embedder: LocalEmbedder
) -> None:
    """Score the pending (item, aspect) pairs with judge, one evaluate call per pair."""
    llm = judge.LLM(
        model=args.model,
        api_base=args.api_base,
        api_key=args.api_key,
        context_window=args.context_window,
        timeout=args.timeout,
        max_retries=2,
        max_concurrency=1,  # llama.cpp's server answers one request at a time
        structured_output=args.structured_output,
    )
    embeddings = judge.Embeddings(
        model=f"openai/{EMBED_MODEL}",
        api_base=embedder.server.base_url,
        api_key="x",
        max_concurrency=1,
    )
    cache = judge.Cache(args.work / "judge-cache.sqlite")
    for item, aspect in todo:
        start, embedded = time.perf_counter(), embedder.requests
        result = judge.evaluate(
            pair(item, aspect),
            metrics=[ASPECTS[aspect][0]],
            llm=llm,
            embeddings=embeddings,
            cache=cache,
            concurrency=1,
            progress=False,
        )
        metric = ASPECTS[aspect][0]
        record = {
            "tool": "judge",
            "item": item["id"],
            "aspect": aspect,
            "scores": [_real(r.scores.get(metric)) for r in result.rows],
            "errors": [
                r.errors.get(metric) or r.reasons.get(metric) or r.error for r in result.rows
            ],
            # judge's usage counts embedding requests too; the embedder counts those alone
            "requests": result.usage.get("requests", 0) - (embedder.requests - embedded),
            "embed_requests": embedder.requests - embedded,
            "cache_hits": result.usage.get("cache_hits", 0),
            "seconds": time.perf_counter() - start,
        }
        record_done(args, record)


def record_done(args: argparse.Namespace, record: dict[str, Any]) -> None:
    """Append a finished record to the run log and say so."""
    record["model"] = args.model
    with (args.work / "runs.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(
        f"{record['tool']:5} {record['item']} {record['aspect']:17} scores {record['scores']} "
        f"requests {record['requests']}+{record['embed_requests']} embed "
        f"{record['seconds']:.0f} s"
        + (f" errors {record['errors']}" if any(record["errors"]) else ""),
        flush=True,
    )


def run_ragas(
    args: argparse.Namespace, todo: list[tuple[dict[str, Any], str]], embedder: LocalEmbedder
) -> None:
    """Score the pending (item, aspect) pairs with RAGAS in its virtualenv, record by record."""
    python = ragas_python()
    with tempfile.TemporaryDirectory() as tmp:
        jobs = Path(tmp) / "jobs.json"
        out = Path(tmp) / "out.jsonl"
        jobs.write_text(
            json.dumps(
                [
                    {
                        "item": item["id"],
                        "aspect": a,
                        "metric": ASPECTS[a][1],
                        "pair": pair(item, a),
                    }
                    for item, a in todo
                ]
            ),
            encoding="utf-8",
        )
        out.touch()
        command = [
            str(python),
            str(HERE.parent / "ragas" / "wikieval_ragas.py"),
            str(jobs),
            args.api_base,
            args.model.split("/", 1)[-1],  # litellm's provider prefix means nothing to langchain
            embedder.server.base_url,
            EMBED_MODEL,
            str(args.timeout),
            str(out),
        ]
        child = subprocess.Popen(command)
        done = 0
        with out.open(encoding="utf-8") as lines:
            while True:  # relay each record as the child writes it, so a kill loses one at most
                line = lines.readline()
                if line.endswith("\n"):
                    record_done(args, json.loads(line))
                    done += 1
                    continue
                if child.poll() is not None and not line:
                    break
                time.sleep(1)
        if child.returncode != 0:
            sys.exit(f"RAGAS runner failed (exit {child.returncode}) after {done} records")


def outcome(scores: list[float | None]) -> float | None:
    """1 when the preferred side (first) scores higher, 0.5 on a tie, 0 when lower."""
    good, bad = scores
    if good is None or bad is None:
        return None
    return 1.0 if good > bad else 0.5 if good == bad else 0.0


def _p(value: float) -> float | None:
    return None if math.isnan(value) else value


def summarise(records: list[dict[str, Any]], items: list[str]) -> dict[str, Any]:
    """Accuracy, ties, failures, requests and time per tool and aspect; paired comparison."""
    by = {(r["tool"], r["item"], r["aspect"]): r for r in records}
    out: dict[str, Any] = {"items": len(items), "aspects": {}, "tools": {}}
    for tool in ("judge", "ragas"):
        mine = [r for r in by.values() if r["tool"] == tool and r["item"] in items]
        out["tools"][tool] = {
            "requests": sum(r["requests"] for r in mine),
            "embed_requests": sum(r.get("embed_requests", 0) for r in mine),
            "seconds": sum(r["seconds"] for r in mine),
            "records": len(mine),
        }
    for aspect, (jm, rm, paper) in ASPECTS.items():
        row: dict[str, Any] = {"judge_metric": jm, "ragas_metric": rm, "paper_ragas": paper}
        outcomes: dict[str, dict[str, float | None]] = {}
        for tool in ("judge", "ragas"):
            got = {i: by[(tool, i, aspect)] for i in items if (tool, i, aspect) in by}
            scored = {i: outcome(r["scores"]) for i, r in got.items()}
            outcomes[tool] = scored
            real = [r["scores"] for i, r in got.items() if scored[i] is not None]
            preferred, other = (np.array([x[k] for x in real], dtype=float) for k in (0, 1))
            measures, counts = pairwise(preferred, other)  # judge agreement's pairwise kind
            accuracy = measures["accuracy"]
            row[tool] = {
                "run": len(got),
                "scored": len(real),
                "failed": len(got) - len(real),
                "accuracy": accuracy.value if real else None,
                "accuracy_95ci": [accuracy.ci_low, accuracy.ci_high] if real else None,
                "ties": counts["ties"],
                "tie_rate": measures["tie_rate"].value if real else None,
                "sign_test_p_vs_chance": _p(measures["sign_test_p"].value),
                "requests": sum(r["requests"] for r in got.values()),
                "embed_requests": sum(r.get("embed_requests", 0) for r in got.values()),
                "seconds": sum(r["seconds"] for r in got.values()),
                "outcomes": scored,
            }
        both = [
            (outcomes["judge"][i], outcomes["ragas"][i])
            for i in items
            if outcomes["judge"].get(i) is not None and outcomes["ragas"].get(i) is not None
        ]
        wins = sum(a > b for a, b in both)  # type: ignore[operator]
        losses = sum(a < b for a, b in both)  # type: ignore[operator]
        row["paired"] = {
            "items": len(both),
            "judge_better": wins,
            "ragas_better": losses,
            "same": len(both) - wins - losses,
            "sign_test_p": _p(sign_test(wins, losses)),
        }
        out["aspects"][aspect] = row
    return out


def _acc(cell: dict[str, Any]) -> str:
    if not cell["run"]:
        return "not run"
    if cell["accuracy"] is None:
        return f"- ({cell['failed']} failed)"
    low, high = cell["accuracy_95ci"]
    text = f"{cell['accuracy']:.2f} [{low:.2f}, {high:.2f}] ({cell['ties']}/{cell['scored']} tied"
    return text + (f", {cell['failed']} failed)" if cell["failed"] else ")")


def _requests(cell: dict[str, Any]) -> str:
    embed = cell["embed_requests"]
    return f"{cell['requests']:.0f}" + (f" (+{embed:.0f})" if embed else "")


def table(summary: dict[str, Any], model: str) -> str:
    """The side-by-side table as markdown."""
    lines = [
        f"WikiEval, first {summary['items']} questions; judge model {model}; embeddings "
        f"{EMBED_MODEL} (local). Accuracy: the preferred side scores higher, a tie counts 0.5; "
        "[95% bootstrap interval].",
        "",
        "| aspect | judge | RAGAS 0.4.3 | paper: RAGAS, gpt-3.5 | judge better / RAGAS better "
        "/ same (sign test p) | chat (+embedding) requests judge / RAGAS | wall time judge / "
        "RAGAS (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for aspect, row in summary["aspects"].items():
        j, r, p = row["judge"], row["ragas"], row["paired"]
        paired = (
            f"{p['judge_better']} / {p['ragas_better']} / {p['same']} (p={p['sign_test_p']:.2f})"
            if p["sign_test_p"] is not None
            else f"0 / 0 / {p['same']} (-)"
            if p["items"]
            else "-"
        )
        lines.append(
            f"| {aspect} ({row['judge_metric']} / {row['ragas_metric']}) | {_acc(j)} | {_acc(r)} "
            f"| {row['paper_ragas']:.2f} | {paired} | {_requests(j)} / {_requests(r)} "
            f"| {j['seconds']:.0f} / {r['seconds']:.0f} |"
        )
    t = summary["tools"]
    lines.append(
        f"| all | | | | | {_requests(t['judge'])} / {_requests(t['ragas'])} "
        f"| {t['judge']['seconds']:.0f} / {t['ragas']['seconds']:.0f} |"
    )
    lines += [
        "",
        "Requests: chat requests sent to the model, embedding requests to the local embedder in "
        "brackets (judge: its usage count, cache hits excluded; RAGAS: HTTP requests counted "
        "by an httpx hook). Wall time: summed over the (item, aspect) runs; a call answered "
        "from judge's cache after an interrupted run costs nothing.",
    ]
    return "\n".join(lines)


def prior_records(path: Path, model: str, tools: list[str]) -> list[dict[str, Any]]:
    """Records rebuilt from an earlier summary JSON whose run log is gone: each outcome
    becomes stand-in scores (1/0, 0.5/0.5, 0/1; a failed pair None/None), which give the
    same accuracy, ties and sign tests; an aspect's request and time totals are shared
    equally among its items (the earlier summary has no per-item figures)."""
    summary = json.loads(path.read_text(encoding="utf-8"))
    stand_in = {1.0: [1.0, 0.0], 0.5: [0.5, 0.5], 0.0: [0.0, 1.0], None: [None, None]}
    records = []
    for aspect, row in summary["aspects"].items():
        for tool in tools:
            cell = row[tool]
            share = 1 / max(len(cell["outcomes"]), 1)
            for item, won in cell["outcomes"].items():
                records.append(
                    {
                        "tool": tool,
                        "item": item,
                        "aspect": aspect,
                        "scores": stand_in[won],
                        "errors": [None, None],
                        "requests": cell["requests"] * share,
                        "embed_requests": cell["embed_requests"] * share,
                        "seconds": cell["seconds"] * share,
                        "model": model,
                        "prior": str(path),
                    }
                )
    return records


def with_ragas_shared(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records, with RAGAS's outcomes of an aspect repeated for each judge-only aspect
    that compares with it (`RAGAS_SHARED`)."""
    shared = [
        {**r, "aspect": derived, "requests": 0, "embed_requests": 0, "seconds": 0}
        for derived, source in RAGAS_SHARED.items()
        for r in records
        if r["tool"] == "ragas" and r["aspect"] == source
    ]
    return records + shared


def pair_accuracy(pairs: list[tuple[float, float]]) -> float:
    """Share of pairs whose first side scores higher, a tie counting 0.5."""
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs)


def rule_alone(item: dict[str, Any], contexts: list[str]) -> float:
    """context_focus's no-shared-word rule with every sentence taken as needed: the share
    of the sentences sharing a content word with the question or the answer."""
    topic = f"{item['question_stripped']}\n{item['answer_stripped']}"
    cut = [s for found in context_sentences(contexts) for s in found]
    return sum(shares_content(s, topic) for s in cut) / len(cut)


def baselines(items: list[dict[str, Any]]) -> str:
    """What the context pairs reward without any model: context_v2 holds context_v1 and
    more, so the shorter side always wins; and context_focus's no-shared-word rule alone
    (every sentence taken as needed, then the rule applied)."""

    def length(contexts: list[str]) -> float:
        return -sum(len(c) for c in contexts)

    shorter = pair_accuracy([(length(i["context_v1"]), length(i["context_v2"])) for i in items])
    rule = pair_accuracy(
        [(rule_alone(i, i["context_v1"]), rule_alone(i, i["context_v2"])) for i in items]
    )
    return (
        f"Context pairs without a model ({len(items)} questions): the shorter context wins "
        f"{shorter:.2f}; context_focus's no-shared-word rule alone {rule:.2f}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="litellm model, e.g. openai/qwen")
    parser.add_argument("--api-base", required=True, help="the chat server's /v1 URL")
    parser.add_argument("--api-key", default="x")
    parser.add_argument("--n", type=int, default=12, help="the first N questions (max 50)")
    parser.add_argument("--tools", default="judge,ragas", help="judge, ragas or both")
    parser.add_argument("--context-window", type=int, default=4096)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    parser.add_argument(
        "--structured-output",
        default="auto",
        help="judge's LLM(structured_output=...); each pair is its own evaluate() run, so with "
        "auto each starts with a json_schema request that llama.cpp rejects: json_object_schema "
        "skips it",
    )
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    parser.add_argument("--markdown", type=Path, help="also write the table here")
    parser.add_argument("--work", type=Path, default=WORK, help="cache and run log directory")
    parser.add_argument(
        "--first", type=int, default=0, help="run only from this question on (0-based)"
    )
    parser.add_argument(
        "--prior",
        type=Path,
        action="append",
        default=[],
        help="a summary JSON of an earlier run whose outcomes count for the items it covers, "
        "per tool (add the earlier run's items without rerunning them)",
    )
    parser.add_argument(
        "--prior-tools", default="judge,ragas", help="the tools whose --prior outcomes count"
    )
    parser.add_argument(
        "--aspects",
        default=",".join(ASPECTS),
        help="run only these aspects (comma-separated); the table still shows all",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    items = load(args.n)
    log = args.work / "runs.jsonl"
    prior_tools = [t.strip() for t in args.prior_tools.split(",") if t.strip()]
    prior = [r for path in args.prior for r in prior_records(path, args.model, prior_tools)]
    records = with_ragas_shared(
        prior
        + (
            [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
            if log.exists()
            else []
        )
    )
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    done = {(r["tool"], r["item"], r["aspect"]) for r in records if r["model"] == args.model}
    aspects = [a.strip() for a in args.aspects.split(",") if a.strip()]
    if unknown := set(aspects) - set(ASPECTS):
        sys.exit(f"unknown --aspects {sorted(unknown)}: choose from {', '.join(ASPECTS)}")
    pending = {
        tool: [
            (i, a)
            for i in items[args.first :]
            for a in aspects
            if (tool, i["id"], a) not in done and not (tool == "ragas" and a in RAGAS_SHARED)
        ]
        for tool in tools
    }
    if any(pending.values()):
        with LocalEmbedder() as embedder:
            if pending.get("judge"):
                run_judge(args, pending["judge"], embedder)
            if pending.get("ragas"):
                run_ragas(args, pending["ragas"], embedder)
        records = with_ragas_shared(
            prior + [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
        )
    mine = [r for r in records if r["model"] == args.model]
    summary = summarise(mine, [i["id"] for i in items])
    summary.update(model=args.model, embeddings=EMBED_MODEL)
    text = table(summary, args.model) + "\n\n" + baselines(items)
    print("\n" + text)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
