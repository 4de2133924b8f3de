"""Conversations judged by a real (small, local) model: are claims that only the
conversation supports recognised as such, are invented ones refused, and what do turns cost?

Five hand-written conversations (one in Chinese), of two or three assistant turns. Every
answer sentence is one claim with a hand label: supported by the turn's `contexts`, by the
conversation (`history`: what the user said, an earlier answer's supported claim) or by
nothing (`none`). The second turns also carry a knowledge-retention label (kept,
contradicted, asked_again) and a retriever query with a fidelity label.

The script judges the conversations (`faithfulness` and `supported_by_history`, one claims
and one verify call per turn; `--more-metrics` adds `knowledge_retention` and
`query_rewrite_fidelity`, a call each per later turn), one conversation per run through one
cache (`--cache`, reused: a second run makes no request), printing each as it ends: per
claim, its label beside the verdict's source, then the agreement.

Cost per turn: the conversation runs' chat requests and prompt characters (as recorded in
the cache: the messages, without the schema instructions json_object mode adds to every
system message), beside the same turns flattened into single-turn
rows (question = the user message before the answer). Those rows are sent, with the same
LLM settings, to a fake server answering their claims calls with the claims the model gave
the conversation's turn (so both sides verify the same claims): their requests and prompt
characters, without spending model calls. `--single-model` judges them with the model
instead (its own cache, about 2 calls per turn more), and their agreement is printed too.

Run (about 22 requests, 1-6 minutes each on the 2 shared cores):
    N_CTX=8192 bash ../shared/local-llm/local_llm.sh start qwen
    python -m bench.quality.conversations_local --cache /tmp/conv-local.sqlite
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import judge
from bench.support.cache_cost import recorded_cost
from judge import LLM, Cache
from judge.testing import FakeLLMServer, heuristic_judge
from judge.testing.replies import data_blocks

# (sentence, label) per answer; labels: contexts, history, none.
Turn = dict[str, Any]

CONVERSATIONS: list[dict[str, Any]] = [
    {
        "id": "lyon",
        "turns": [
            {
                "role": "user",
                "content": "I am moving to Lyon next month and need to ship three boxes.",
            },
            {
                "role": "assistant",
                "content": "We ship boxes anywhere in France. Standard shipping takes three days.",
                "contexts": [
                    "Parcel Co ships boxes to every city in France.",
                    "Standard shipping takes three days; express shipping takes one day.",
                ],
                "labels": ["contexts", "contexts"],
            },
            {"role": "user", "content": "Which option gets them there fastest?"},
            {
                "role": "assistant",
                "content": "Express shipping takes one day. Your three boxes can reach Lyon "
                "tomorrow by express. Express shipping is free on Sundays.",
                "contexts": ["Express shipping takes one day and costs 20 euros per box."],
                "labels": ["contexts", "history", "none"],
                "retention": "kept",
                "query": "fastest shipping option for three boxes to Lyon",
                "query_label": "faithful",
            },
        ],
    },
    {
        "id": "allergy",
        "turns": [
            {
                "role": "user",
                "content": "I am allergic to peanuts. Can you suggest a snack for the train?",
            },
            {
                "role": "assistant",
                "content": "Rice crackers are a good snack for the train. "
                "Rice crackers contain no nuts.",
                "contexts": ["Rice crackers are made from rice and salt and contain no nuts."],
                "labels": ["none", "contexts"],
            },
            {"role": "user", "content": "What about something sweet?"},
            {
                "role": "assistant",
                "content": "Try our peanut butter cookies. Peanut butter cookies are our "
                "best-selling sweet snack.",
                "contexts": ["Peanut butter cookies are the shop's best-selling sweet snack."],
                "labels": ["none", "contexts"],
                "retention": "contradicted",
                "query": "sweet snack",
                "query_label": "incomplete",
            },
        ],
    },
    {
        "id": "refund",
        "turns": [
            {"role": "user", "content": "My order number is 4512 and it arrived damaged."},
            {
                "role": "assistant",
                "content": "Order 4512 arrived damaged. Damaged orders are refunded in full.",
                "contexts": ["Orders that arrive damaged are refunded in full."],
                "labels": ["history", "contexts"],
            },
            {"role": "user", "content": "How long does the refund take?"},
            {
                "role": "assistant",
                "content": "Refunds are paid within five working days. Please tell me your "
                "order number.",
                "contexts": ["Refunds are paid within five working days."],
                "labels": ["contexts", "none"],
                "retention": "asked_again",
                "query": "refund time for damaged order 4512",
                "query_label": "faithful",
            },
            {"role": "user", "content": "So I get all my money back?"},
            {
                "role": "assistant",
                "content": "Damaged orders are refunded in full. Refunds go back to your card. "
                "You will also get a voucher of ten euros.",
                "contexts": ["Refunds are paid back to the card used for the order."],
                # the first rests on turn 2's verified claim, the second on this turn's context
                "labels": ["history", "contexts", "none"],
            },
        ],
    },
    {
        "id": "museum",
        "turns": [
            {"role": "user", "content": "Does the city museum open on Mondays?"},
            {
                "role": "assistant",
                "content": "The city museum is closed on Mondays. Entry is free for students.",
                "contexts": ["The city museum is closed on Mondays."],
                "labels": ["contexts", "none"],
            },
            {
                "role": "user",
                "content": "Great, I am a student. What time does it open on Tuesday?",
            },
            {
                "role": "assistant",
                "content": "The city museum opens at 9 am on Tuesday. Entry is free for students.",
                "contexts": ["From Tuesday to Sunday the city museum opens at 9 am."],
                "labels": ["contexts", "none"],
                "retention": "kept",
                "query": "city museum opening time on Tuesday",
                "query_label": "faithful",
            },
        ],
    },
    {
        "id": "gaotie",
        "turns": [
            {"role": "user", "content": "我住在上海，想订一张去北京的高铁票。"},
            {
                "role": "assistant",
                "content": "上海到北京每天都有多班高铁。",
                "contexts": ["上海与北京之间每天有多班高铁。"],
                "labels": ["contexts"],
            },
            {"role": "user", "content": "最快要多久？"},
            {
                "role": "assistant",
                "content": "上海到北京的高铁最快需要4小时18分钟。你从上海出发。",
                "contexts": ["京沪高铁最快的列车用时4小时18分钟。"],
                "labels": ["contexts", "history"],
                "retention": "kept",
                "query": "上海到北京高铁最快用时",
                "query_label": "faithful",
            },
        ],
    },
]
# Judged in this order, each conversation its own run (printed as it ends: a run cut short
# by the time it takes still reports the conversations it finished): those with claims
# only the conversation supports first.
ORDER = ("lyon", "refund", "gaotie", "allergy", "museum")
LABEL_KEYS = ("labels", "retention", "query_label")


def conversations() -> list[dict[str, Any]]:
    """The conversations as judge reads them (the hand labels left out)."""
    return [
        {
            "id": c["id"],
            "turns": [{k: v for k, v in t.items() if k not in LABEL_KEYS} for t in c["turns"]],
        }
        for c in CONVERSATIONS
    ]


def single_rows() -> list[dict[str, Any]]:
    """Each assistant turn as a single-turn row: the user message before it, the answer."""
    rows = []
    for c in CONVERSATIONS:
        for i, turn in enumerate(c["turns"]):
            if turn["role"] == "assistant":
                question = c["turns"][i - 1]["content"]
                rows.append(
                    {
                        "id": f"{c['id']}#{i + 1}",
                        "question": question,
                        "answer": turn["content"],
                        "contexts": turn["contexts"],
                    }
                )
    return rows


def labels_by_turn() -> dict[str, dict[str, Any]]:
    """Hand labels by row id."""
    return {
        f"{c['id']}#{i + 1}": t
        for c in CONVERSATIONS
        for i, t in enumerate(c["turns"])
        if t["role"] == "assistant"
    }


def claim_outcome(verdict: dict[str, Any]) -> str:
    """A verdict as a label: contexts, history or none."""
    if verdict.get("verdict") != "supported":
        return "none"
    return str(verdict.get("source") or "contexts")


def llm_for(model: str, api_base: str) -> LLM:
    """The local model's settings: llama.cpp's server refuses OpenAI's json_schema (HTTP
    500) and takes json_object with a schema; it answers one request at a time."""
    return LLM(
        model,
        api_base=api_base,
        api_key="x",
        timeout=900,
        max_retries=2,
        max_concurrency=1,
        structured_output="json_object",
        context_window=8192,
    )


def show_turn(row: Any, want: dict[str, Any], agree: Counter[tuple[str, str]]) -> None:
    """A judged turn's claims beside their labels, counted into `agree` when the model's
    claims match the labelled sentences one to one."""
    claims = row.evidence.get("answer_claims", [])
    verdicts = row.evidence.get("answer_verdicts", [])
    print(f"\n{row.id}: {len(claims)} claims for {len(want['labels'])} labelled sentences")
    if row.errors:
        print(f"  errors: {row.errors}")
    for i, v in enumerate(verdicts):
        text = claims[v["claim"]] if v["claim"] < len(claims) else "?"
        label = want["labels"][i] if len(verdicts) == len(want["labels"]) else "?"
        got = claim_outcome(v)
        mark = "" if label == "?" else ("ok" if got == label else "MISS")
        print(f"  label {label:8} got {got:8} {mark:4} {v.get('verdict'):12} {text[:64]}")
    got = [claim_outcome(v) for v in verdicts]
    if len(got) == len(want["labels"]):
        agree.update(zip(want["labels"], got, strict=True))
    for key, metric, evidence in (
        ("retention", "knowledge_retention", "retention"),
        ("query_label", "query_rewrite_fidelity", "query_rewrite"),
    ):
        if key in want and metric in row.scores:
            print(
                f"  {metric} {row.scores[metric]} (label {want[key]}): {row.evidence.get(evidence)}"
            )


def print_agreement(name: str, table: Counter[tuple[str, str]]) -> None:
    total = sum(table.values())
    right = sum(n for (w, g), n in table.items() if w == g)
    print(f"  {name}: {right}/{total} as labelled; (label, outcome): {sorted(table.items())}")
    for label in ("contexts", "history", "none"):
        row = {g: n for (w, g), n in table.items() if w == label}
        if row:
            print(f"    labelled {label}: {row}")


def flattened_cost(rows: list[Any], llm: LLM) -> tuple[int, int, int]:
    """(turns, chat requests, prompt characters) of the judged turns as single-turn rows,
    sent with `llm`'s settings to a fake server answering each claims call with the claims
    the model gave that turn (`heuristic_judge` for the verify calls)."""
    by_id = {str(r.id): r.evidence.get("answer_claims") for r in rows}
    singles = [r for r in single_rows() if by_id.get(r["id"])]
    claims_of = {r["answer"]: by_id[r["id"]] for r in singles}

    def chat(body: dict[str, Any]) -> str:
        system = str(body["messages"][0]["content"])
        if system.startswith("You split one"):
            text = data_blocks(str(body["messages"][-1]["content"])).get("text", "")
            return json.dumps({"claims": claims_of.get(text, [])})
        return heuristic_judge(body)

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=chat) as server:
        fake = dataclasses.replace(llm, api_base=server.base_url, max_concurrency=4)
        path = str(Path(tmp) / "flat.sqlite")
        judge.evaluate(
            singles, metrics=["faithfulness"], llm=fake, cache=Cache(path), progress=False
        )
        requests, characters = recorded_cost(path)  # counted as the conversations' are: in a cache
    return len(singles), requests, characters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai/qwen")
    parser.add_argument("--api-base", default="http://127.0.0.1:8089/v1")
    parser.add_argument("--cache", default="/tmp/conv-local.sqlite")
    parser.add_argument("--more-metrics", action="store_true")
    parser.add_argument("--single-model", action="store_true")
    parser.add_argument("--only", help="comma-separated conversation ids (default: all)")
    args = parser.parse_args()
    llm = llm_for(args.model, args.api_base)
    conv_cache, single_cache = f"{args.cache}.conversations", f"{args.cache}.single"
    metrics = ["faithfulness", "supported_by_history"]
    if args.more_metrics:
        metrics += ["knowledge_retention", "query_rewrite_fidelity"]
    print("load:", Path("/proc/loadavg").read_text().strip(), flush=True)
    by_id = {c["id"]: c for c in conversations()}
    chosen = args.only.split(",") if args.only else list(ORDER)
    labels = labels_by_turn()
    agree: Counter[tuple[str, str]] = Counter()
    rows: list[Any] = []
    for name in chosen:
        started = time.monotonic()
        result = judge.evaluate(
            [by_id[name]], metrics=metrics, llm=llm, cache=Cache(conv_cache), progress=False
        )
        for row in result.rows:
            show_turn(row, labels[str(row.id)], agree)
        rows += result.rows
        load = Path("/proc/loadavg").read_text().split()[0]
        print(f"  ({name}: {time.monotonic() - started:,.0f} s; load {load})", flush=True)
    print("\nclaims where the model's claims matched the labelled sentences one to one:")
    print_agreement("conversation", agree)
    requests, characters = recorded_cost(conv_cache)
    turns = len(rows)
    print(
        f"\ncost per turn, {turns} turns: conversation {requests / turns:.2f} chat requests, "
        f"{characters / turns:,.0f} prompt characters"
    )
    count, sent, flat = flattened_cost(rows, llm)
    print(
        f"  the same {count} turns as single-turn rows (same claims, fake server): "
        f"{sent / count:.2f} requests, {flat / count:,.0f} prompt characters per turn; "
        f"conversation / single {characters / turns / (flat / count):.2f}x"
    )
    if args.single_model:
        ids = {str(r.id) for r in rows}
        single = judge.evaluate(
            [r for r in single_rows() if r["id"] in ids],
            metrics=["faithfulness"],
            llm=llm,
            cache=Cache(single_cache),
            progress=False,
        )
        alone: Counter[tuple[str, str]] = Counter()
        for row in single.rows:
            want = labels[str(row.id)]["labels"]
            got = [claim_outcome(v) for v in row.evidence.get("answer_verdicts", [])]
            if len(got) == len(want):
                alone.update(zip(want, got, strict=True))
        print_agreement("single-turn rows, judged by the model", alone)
        requests, characters = recorded_cost(single_cache)
        n = len(single.rows)
        print(f"  single-turn rows: {requests / n:.2f} requests, {characters / n:,.0f} characters")
    print("load after:", Path("/proc/loadavg").read_text().strip())


if __name__ == "__main__":
    main()
