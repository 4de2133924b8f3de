"""Random conversations for property-style tests of long chats (seeded, so reproducible):
system messages, greetings, several user messages in a row, tool calls with their results
(some said aloud), two assistant messages in a row,
facts repeated across turns, blank contexts, and conversations sharing an id and a
beginning but going on differently."""

from __future__ import annotations

import random
from typing import Any

FACTS = (
    "Parcels go to Lyon.",
    "The courier comes daily.",
    "Express costs nine euros.",
    "I live in Lyon.",
    "Returns take five days.",
    "Paris is far.",
)


def random_chat(rng: random.Random, cid: str, turns: int) -> dict[str, Any]:
    """One conversation of about `turns` assistant turns, in our shape."""
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.3:
        messages.append({"role": "system", "content": rng.choice(FACTS)})
    if rng.random() < 0.3:
        messages.append({"role": "assistant", "content": "Hello! " + rng.choice(FACTS)})
    for number in range(turns):
        for _ in range(rng.choice((1, 1, 2))):
            question = rng.choice(("Ok?", "Why?", "How much?", "Where?"))
            messages.append({"role": "user", "content": f"{rng.choice(FACTS)} {question}"})
        if rng.random() < 0.2:
            messages.append({"role": "assistant", "content": ""})  # a tool call alone
            messages.append({"role": "tool", "content": rng.choice(FACTS)})
        elif rng.random() < 0.15:  # a tool call said aloud: a turn of its own
            call = {"name": "look_up", "arguments": "{}"}
            said_aloud = {"role": "assistant", "content": "Let me check.", "tool_calls": [call]}
            messages.append({**said_aloud, "contexts": [rng.choice(FACTS)]})  # (see below)
            messages.append({"role": "tool", "content": rng.choice(FACTS)})
        said = rng.sample(FACTS, rng.randint(1, 3))
        if rng.random() < 0.3:
            said.append(f"Note {cid} {number} stands alone.")
        # A first turn has a context: with none and nothing said before it, its row is
        # not judged, and its evidence (its supported claims) would not be in the results.
        contexts = rng.sample(FACTS, rng.randint(0 if number else 1, 2))
        if number and rng.random() < 0.1:
            contexts = ["  "]  # blank contexts only: none
        messages.append({"role": "assistant", "content": " ".join(said), "contexts": contexts})
        if rng.random() < 0.1:  # a second chat bubble answering the same question
            bubble = {"role": "assistant", "content": rng.choice(FACTS)}
            messages.append({**bubble, "contexts": [rng.choice(FACTS)]})
    return {"id": cid, "turns": messages}


def random_chats(seed: int, count: int = 12) -> list[dict[str, Any]]:
    """`count` conversations, and two more that share an id and their first turns with
    earlier ones, then go on differently."""
    rng = random.Random(seed)
    chats = [random_chat(rng, f"c{i}", rng.randint(1, 7)) for i in range(count)]
    for source in chats[:2]:
        head = source["turns"][: max(2, len(source["turns"]) // 2)]
        tail = random_chat(rng, str(source["id"]), rng.randint(1, 3))["turns"]
        chats.append({"id": source["id"], "turns": [*head, *tail]})
    return chats
