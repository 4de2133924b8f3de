"""Conversations judged by a real (small, local) model: are claims that only the
conversation supports recognised as such, are invented ones refused, and what do turns cost?

Five hand-written conversations (one in Chinese), each with two assistant turns. Every
answer sentence is one claim with a hand label: supported by the turn's `contexts`, by the
conversation (`history`: what the user said, an earlier supported answer) or by nothing
(`none`). The second turns also carry a knowledge-retention label (kept, contradicted,
asked_again) and a retriever query with a fidelity label. The script judges the
conversations (`faithfulness`, `supported_by_history`, `knowledge_retention`,
`query_rewrite_fidelity`) and the same turns as single-turn rows (`faithfulness`), through
one cache (`--cache`, reused: a second run makes no request), and prints, per claim, the
label beside the verdict and its source, the agreement, and requests and prompt characters
per turn for both.

Run (about 45 requests, 20-30 minutes on 2 CPU cores with the local model):
    bash ../shared/local-llm/local_llm.sh start qwen    (N_CTX=8192 for the longer prompts)
    python -m bench.quality.conversations_local --cache /tmp/conv-local.sqlite
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import judge
from judge import LLM, Cache

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai/qwen")
    parser.add_argument("--api-base", default="http://127.0.0.1:8089/v1")
    parser.add_argument("--cache", default="/tmp/conv-local.sqlite")
    parser.add_argument("--out", default="/tmp/conv-local")
    args = parser.parse_args()
    # llama.cpp's server refuses OpenAI's json_schema (HTTP 500) and takes json_object with
    # a schema; it answers one request at a time.
    llm = LLM(
        args.model,
        api_base=args.api_base,
        api_key="x",
        timeout=600,
        max_retries=2,
        max_concurrency=1,
        structured_output="json_object",
        context_window=8192,
    )
    conv_cache, single_cache = f"{args.cache}.conversations", f"{args.cache}.single"
    print("load:", Path("/proc/loadavg").read_text().strip())
    conv = judge.evaluate(
        conversations(),
        metrics=[
            "faithfulness",
            "supported_by_history",
            "knowledge_retention",
            "query_rewrite_fidelity",
        ],
        llm=llm,
        cache=Cache(conv_cache),
        progress=False,
    )
    single = judge.evaluate(
        single_rows(), metrics=["faithfulness"], llm=llm, cache=Cache(single_cache), progress=False
    )
    conv.write(Path(args.out) / "conversations")
    single.write(Path(args.out) / "single")
    labels = labels_by_turn()
    agree: Counter[tuple[str, str]] = Counter()
    single_agree: Counter[tuple[str, str]] = Counter()
    singles = {r.id: r for r in single.rows}
    for row in conv.rows:
        want = labels[str(row.id)]
        claims = row.evidence.get("answer_claims", [])
        verdicts = row.evidence.get("answer_verdicts", [])
        print(f"\n{row.id}: {len(claims)} claims for {len(want['labels'])} labelled sentences")
        for v in verdicts:
            text = claims[v["claim"]] if v["claim"] < len(claims) else "?"
            print(f"  {claim_outcome(v):9} {v.get('verdict'):10} {text[:70]}")
        got = [claim_outcome(v) for v in verdicts]
        if len(got) == len(want["labels"]):
            agree.update(zip(want["labels"], got, strict=True))
            alone = [
                claim_outcome(v) for v in singles[str(row.id)].evidence.get("answer_verdicts", [])
            ]
            if len(alone) == len(want["labels"]):
                single_agree.update(zip(want["labels"], alone, strict=True))
        if "retention" in want:
            found = row.evidence.get("retention")
            score = row.scores.get("knowledge_retention")
            print(f"  knowledge_retention {score} (label {want['retention']}): {found}")
        if "query_label" in want:
            found = row.evidence.get("query_rewrite")
            score = row.scores.get("query_rewrite_fidelity")
            print(f"  query_rewrite_fidelity {score} (label {want['query_label']}): {found}")
    print("\nclaims where the model's claims matched the labelled sentences one to one:")
    for name, table in (("conversation", agree), ("single-turn", single_agree)):
        total = sum(table.values())
        right = sum(n for (w, g), n in table.items() if w == g)
        print(f"  {name}: {right}/{total} as labelled; (label, outcome): {sorted(table.items())}")
    for name, result, path in (
        ("conversation", conv, conv_cache),
        ("single-turn", single, single_cache),
    ):
        requests, characters = cost(path)
        turns = len(result.rows)
        print(
            f"  {name}: {requests} chat requests recorded, {requests / turns:.2f} per turn; "
            f"{characters / turns:,.0f} prompt characters per turn"
        )


def cost(path: str) -> tuple[int, int]:
    """Chat requests recorded in a cache, and the characters of their messages."""
    requests = characters = 0
    for entry in Cache(path, mode="replay").entries():
        if entry.kind == "chat":
            requests += 1
            characters += sum(len(str(m.get("content", ""))) for m in entry.request["messages"])
    return requests, characters


if __name__ == "__main__":
    main()
