"""What a judge cache recorded, as the quality benchmarks report cost: chat requests and the
characters of their messages."""

from __future__ import annotations

from judge import Cache


def recorded_cost(path: str) -> tuple[int, int]:
    """Chat requests recorded in a cache, and the characters of their messages."""
    requests = characters = 0
    for entry in Cache(path, mode="replay").entries():
        if entry.kind == "chat":
            requests += 1
            characters += sum(len(str(m.get("content", ""))) for m in entry.request["messages"])
    return requests, characters
