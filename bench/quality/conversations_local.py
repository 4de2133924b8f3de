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

`--long` judges instead two conversations of long answers (LONG_CONVERSATIONS), where what
the judges reading a later turn's question get of the conversation before it is cut
(judge.samples.QUESTION_CONTEXT_BUDGET) and the user's first message, which later answers
rest on, falls beyond the cut; `context_precision` is asked too, each context hand-labelled
relevant or not. `--cut` makes only the calls the cut changes, the claims and grading
calls of those turns, with the question read whole (the last four messages, as before the
bound) and bounded, and prints both beside the labels (16 requests).

Run (about 22 requests, 1-6 minutes each on the 2 shared cores; up to 7 minutes a request
when the cores are busy):
    N_CTX=8192 bash ../shared/local-llm/local_llm.sh start qwen
    python -m bench.quality.conversations_local --cache /tmp/conv-local.sqlite
    python -m bench.quality.conversations_local --cut --cache /tmp/conv-local.sqlite
"""

from __future__ import annotations

import argparse
import asyncio
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
from judge.llm.session import LLMSession
from judge.metrics.judges import extract_claims, grade_contexts
from judge.samples import Message, Sample
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
# Long turns (`--long`): answers of 400-700 characters, so what the judges reading a turn's
# question get of the conversation before it (claims, context grades) is cut to its last
# 600 characters (judge.samples.context_before) from the second turn on, and the user's
# first message, which later answers rest on, is no longer in it. Each context carries a
# hand label (`relevant`: whether it helps answer the question as the conversation put it:
# a walnut starter does not, for a guest allergic to nuts).
LONG_CONVERSATIONS: list[dict[str, Any]] = [
    {
        "id": "movers",
        "turns": [
            {
                "role": "user",
                "content": "Hi! I am moving from Paris to Lyon on 14 March and need to ship "
                "a sofa and six boxes of books to my new flat.",
            },
            {
                "role": "assistant",
                "content": "Thanks for asking Parcel Co. We carry furniture and boxes between "
                "any two cities in France. A sofa travels as a bulky item: our team collects "
                "it, wraps it in protective film and carries it to the room of your choice. "
                "Boxes of books travel as standard parcels of up to 30 kilos each, so small "
                "boxes are best, as books are heavy. Standard delivery takes three working "
                "days and express delivery takes one working day. You can book online or by "
                "phone, and you can change the date free of charge up to 48 hours before "
                "collection. Would you like standard or express delivery?",
                "contexts": [
                    "Parcel Co carries furniture and boxes between any two cities in France.",
                    "Bulky items such as sofas are collected, wrapped in protective film and "
                    "carried to the room of the customer's choice.",
                    "Standard delivery takes three working days; express delivery takes one "
                    "working day. Parcels weigh up to 30 kilos.",
                ],
                "labels": ["contexts", "contexts", "contexts", "contexts", "none"],
                "relevant": [True, True, True],
            },
            {"role": "user", "content": "Express, please. Can it all be there before I arrive?"},
            {
                "role": "assistant",
                "content": "Express delivery takes one working day. If we collect on 12 March, "
                "your sofa and six boxes reach Lyon on 13 March, the day before you arrive. "
                "Express costs 90 euros for a sofa and 8 euros per box. Delivery is free on "
                "Sundays.",
                "contexts": [
                    "Express delivery takes one working day from collection.",
                    "Express prices: 90 euros for a sofa or another bulky item, 8 euros per box.",
                    "Parcel Co offices are closed on Sundays.",
                ],
                "labels": ["contexts", "history", "contexts", "none"],
                "relevant": [True, True, False],
            },
            {"role": "user", "content": "Do you also pack the books for me?"},
            {
                "role": "assistant",
                "content": "Yes, our team packs books for 15 euros per box. Your six boxes of "
                "books would be packed on the day of collection. The sofa is wrapped in "
                "protective film at no extra cost.",
                "contexts": [
                    "Packing service: our team packs books and fragile items for 15 euros per "
                    "box on the day of collection.",
                    "Bulky items are wrapped in protective film at no extra cost.",
                    "Parcel Co was founded in Marseille in 1998.",
                ],
                "labels": ["contexts", "history", "contexts"],
                "relevant": [True, True, False],
            },
        ],
    },
    {
        "id": "dinner",
        "turns": [
            {
                "role": "user",
                "content": "I am cooking dinner for eight people on Saturday; two of my guests "
                "are vegan and one is allergic to nuts.",
            },
            {
                "role": "assistant",
                "content": "A dinner for eight is easiest with three courses that can be made "
                "ahead. Plan the shopping two days before, and cook the dessert the day before, "
                "so that on Saturday only the main course needs the oven. Set the table in the "
                "morning and chill the drinks early. A starter that can be served cold leaves "
                "you free to greet your guests, and a main course that bakes for an hour gives "
                "you time to sit down with them. Write a timeline for the afternoon, working "
                "back from the time you want to eat. Would you like suggestions for each "
                "course?",
                "contexts": [
                    "Dinner parties: make the dessert the day before and shop two days ahead.",
                    "A cold starter and a main course that bakes for an hour leave the host "
                    "time with the guests.",
                ],
                "labels": ["none", "contexts", "none", "contexts", "none"],
                "relevant": [True, True],
            },
            {"role": "user", "content": "Yes please. What starter would you suggest?"},
            {
                "role": "assistant",
                "content": "A roasted tomato soup works well: it is vegan and contains no "
                "nuts. Make enough for all eight guests. The soup is ready in forty minutes.",
                "contexts": [
                    "Walnut and pear salad: a classic cold starter with blue cheese and honey.",
                    "Roasted tomato soup: tomatoes, onion, garlic, olive oil and vegetable "
                    "stock; vegan; nut-free; ready in 40 minutes.",
                ],
                "labels": ["contexts", "history", "contexts"],
                "relevant": [False, True],
            },
            {"role": "user", "content": "And for dessert?"},
            {
                "role": "assistant",
                "content": "Try a dark chocolate sorbet: it is vegan and nut-free. Your guest "
                "with the nut allergy can have it too. It keeps in the freezer for a week.",
                "contexts": [
                    "Almond cake: ground almonds, eggs and sugar; a favourite dessert for "
                    "dinner parties.",
                    "Dark chocolate sorbet: cocoa, sugar and water; vegan and nut-free; keeps "
                    "a week in the freezer.",
                ],
                "labels": ["contexts", "history", "contexts"],
                "relevant": [False, True],
            },
        ],
    },
]
LONG_ORDER = ("movers", "dinner")

# Judged in this order, each conversation its own run (printed as it ends: a run cut short
# by the time it takes still reports the conversations it finished): those with claims
# only the conversation supports first.
ORDER = ("lyon", "refund", "gaotie", "allergy", "museum")
LABEL_KEYS = ("labels", "retention", "query_label", "relevant")


def conversations(source: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The conversations (of `source`, CONVERSATIONS by default) as judge reads them (the
    hand labels left out)."""
    return [
        {
            "id": c["id"],
            "turns": [{k: v for k, v in t.items() if k not in LABEL_KEYS} for t in c["turns"]],
        }
        for c in source or CONVERSATIONS
    ]


def single_rows(source: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Each assistant turn as a single-turn row: the user message before it, the answer."""
    rows = []
    for c in source or CONVERSATIONS:
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


def labels_by_turn(source: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Hand labels by row id."""
    return {
        f"{c['id']}#{i + 1}": t
        for c in source or CONVERSATIONS
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
    if "relevant" in want and "context_grades" in row.evidence:
        grades = {g["context"]: g["grade"] for g in row.evidence["context_grades"]}
        shown = [
            f"{i}: grade {grades.get(i, '?')} ({'relevant' if r else 'not relevant'})"
            for i, r in enumerate(want["relevant"])
        ]
        print(f"  context_precision {row.scores.get('context_precision')}: " + "; ".join(shown))
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


def flattened_cost(
    rows: list[Any],
    llm: LLM,
    source: list[dict[str, Any]] | None = None,
    metrics: tuple[str, ...] = ("faithfulness",),
) -> tuple[int, int, int]:
    """(turns, chat requests, prompt characters) of the judged turns as single-turn rows,
    sent with `llm`'s settings to a fake server answering each claims call with the claims
    the model gave that turn (`heuristic_judge` for the verify calls)."""
    by_id = {str(r.id): r.evidence.get("answer_claims") for r in rows}
    singles = [r for r in single_rows(source) if by_id.get(r["id"])]
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
        judge.evaluate(singles, metrics=list(metrics), llm=fake, cache=Cache(path), progress=False)
        requests, characters = recorded_cost(path)  # counted as the conversations' are: in a cache
    return len(singles), requests, characters


def cut_turns(source: list[dict[str, Any]]) -> list[tuple[str, Sample]]:
    """The assistant turns of `source` whose conversation before the question the judges
    read is cut by the bound (judge.samples.QUESTION_CONTEXT_BUDGET), as (id, sample)."""
    found = []
    for conv in conversations(source):
        turns = conv["turns"]
        history = [Message(t["role"], t["content"], k + 1) for k, t in enumerate(turns)]
        for k, turn in enumerate(turns):
            if turn["role"] != "assistant" or k < 2:
                continue
            sample = Sample(
                turns[k - 1]["content"],
                turn["content"],
                tuple(turn["contexts"]),
                history=tuple(history[:k]),
                turn=k + 1,
                conversation_id=conv["id"],
            )
            if sample.question_in_context() != sample.question_in_context(budget=None):
                found.append((f"{conv['id']}#{k + 1}", sample))
    return found


async def cut_calls(llm: LLM, cache: str, only: list[str] | None) -> None:
    """The claims and grading calls of each cut turn of LONG_CONVERSATIONS, with the question
    as read without the bound (the last four messages whole) and with it, beside the hand
    labels: what the bound changes. Those calls alone: the verify call reads the claims and
    a conversation block the bound does not touch, so equal claims get equal verdicts."""
    labels = labels_by_turn(LONG_CONVERSATIONS)
    session = LLMSession(llm, cache=Cache(cache))
    try:
        for name, sample in cut_turns(LONG_CONVERSATIONS):
            if only and name.split("#")[0] not in only:
                continue
            want = labels[name]
            read = {
                "whole": sample.question_in_context(budget=None),
                "bounded": sample.question_in_context(),
            }
            print(
                f"\n{name}: {len(read['whole']):,} -> {len(read['bounded']):,} "
                "characters of question"
            )
            for kind, question in read.items():
                started = time.monotonic()
                grades = await grade_contexts(
                    session,
                    question=question,
                    contexts=sample.contexts,
                    reference=sample.answer,
                    sample=name,
                )
                shown = "; ".join(
                    f"{g.context}: {g.grade} "
                    f"({'relevant' if want['relevant'][g.context] else 'not relevant'})"
                    for g in grades
                    if g.context is not None and g.context < len(want["relevant"])
                )
                print(
                    f"  {kind:8} grades   {shown}  [{time.monotonic() - started:,.0f} s]",
                    flush=True,
                )
            for kind, question in read.items():
                started = time.monotonic()
                claims = await extract_claims(
                    session, question=question, text=sample.answer or "", sample=name
                )
                print(f"  {kind:8} claims   [{time.monotonic() - started:,.0f} s]", flush=True)
                for claim in claims:
                    print(f"    - {claim}")
            print(f"  labels: {want['labels']}", flush=True)
    finally:
        await session.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai/qwen")
    parser.add_argument("--api-base", default="http://127.0.0.1:8089/v1")
    parser.add_argument("--cache", default="/tmp/conv-local.sqlite")
    parser.add_argument("--more-metrics", action="store_true")
    parser.add_argument("--single-model", action="store_true")
    parser.add_argument("--only", help="comma-separated conversation ids (default: all)")
    parser.add_argument(
        "--long",
        action="store_true",
        help="the long-turn conversations (LONG_CONVERSATIONS), with context_precision",
    )
    parser.add_argument(
        "--cut",
        action="store_true",
        help="only the claims and grading calls of the long turns the bound cuts, without "
        "and with the bound (`cut_calls`)",
    )
    parser.add_argument(
        "--fallback",
        help="a conversations cache read first (an earlier run's): only this run's new "
        "requests are recorded, and counted, in --cache",
    )
    args = parser.parse_args()
    llm = llm_for(args.model, args.api_base)
    if args.cut:
        only = args.only.split(",") if args.only else None
        asyncio.run(cut_calls(llm, f"{args.cache}.cut", only))
        return
    conv_cache, single_cache = f"{args.cache}.conversations", f"{args.cache}.single"
    metrics = ["faithfulness", "supported_by_history"]
    if args.more_metrics:
        metrics += ["knowledge_retention", "query_rewrite_fidelity"]
    if args.long:
        metrics += ["context_precision"]
    source = LONG_CONVERSATIONS if args.long else CONVERSATIONS
    fallbacks = [args.fallback] if args.fallback else []
    print("load:", Path("/proc/loadavg").read_text().strip(), flush=True)
    by_id = {c["id"]: c for c in conversations(source)}
    chosen = args.only.split(",") if args.only else list(LONG_ORDER if args.long else ORDER)
    labels = labels_by_turn(source)
    agree: Counter[tuple[str, str]] = Counter()
    rows: list[Any] = []
    for name in chosen:
        started = time.monotonic()
        result = judge.evaluate(
            [by_id[name]],
            metrics=metrics,
            llm=llm,
            cache=Cache(conv_cache, fallbacks=fallbacks),
            progress=False,
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
    if fallbacks:
        print(f"\nrequests not in {args.fallback}: {requests}, {characters:,} prompt characters")
        print("load after:", Path("/proc/loadavg").read_text().strip())
        return
    print(
        f"\ncost per turn, {turns} turns: conversation {requests / turns:.2f} chat requests, "
        f"{characters / turns:,.0f} prompt characters"
    )
    asked = ("faithfulness", "context_precision") if args.long else ("faithfulness",)
    count, sent, flat = flattened_cost(rows, llm, source, asked)
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
