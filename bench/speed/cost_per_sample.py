"""Requests and prompt size per sample of judge's four core metrics, beside RAGAS's design.

The 12+ samples of the demo data (judge/demo) are replayed from judgments.jsonl through the fake
OpenAI-compatible server (no network, no cache), so every judge call is counted where it
is sent. RAGAS figures are estimates from its published design, not measurements:
faithfulness makes 2 chat calls (statements, then NLI verdicts), answer relevancy 1 call
with n=3 (strictness 3; 3 calls where n > 1 is unsupported) plus 1 embedding request,
context precision 1 call per context, context recall 1 call. Its context-precision prompt
carries ~3,900 fixed characters (instructions and examples) per context.

Run: python -m bench.speed.cost_per_sample
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any

from judge.cli.demo import demo_dir
from judge.testing import FakeLLMServer, RecordedRequest, recorded_chat, score_fixture

FIXTURES = demo_dir()  # the demo data
CORE = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
CHAT, EMBED = "/v1/chat/completions", "/v1/embeddings"
RAGAS_CP_FIXED_CHARS = 3_900  # estimate: RAGAS's context-precision prompt without the inputs
GRADING_JUDGE = "You judge how useful each retrieved context"


@dataclass
class Row:
    """Measured judge figures and estimated RAGAS figures for one sample."""

    sample: str
    contexts: int
    chat: int
    embed: int
    chars: int
    grade_chars: int  # characters of judge's one grading call, for the RAGAS CP comparison
    blank_claims: int  # claims calls for an empty text (an answer or ground truth absent)
    ragas_chat: int
    ragas_chat_no_n: int
    ragas_embed: int
    ragas_cp_chars: int


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def ragas_estimate(sample: dict[str, Any]) -> tuple[int, int, int, int]:
    """(chat calls with n=3, chat calls without n, embedding requests, CP prompt chars).

    A metric is counted only where it is defined for the sample, by the same rules as
    judge's NaN reasons (an empty answer, no contexts, no ground truth).
    """
    contexts: list[str] = sample["contexts"]
    answer_ok = not _blank(sample["answer"])
    chat = no_n = embed = 0
    if answer_ok and contexts:
        chat, no_n = chat + 2, no_n + 2  # faithfulness: statements, then NLI
    if answer_ok:
        chat, no_n, embed = chat + 1, no_n + 3, embed + 1  # answer relevancy
    chat, no_n = chat + len(contexts), no_n + len(contexts)  # context precision
    if contexts and not _blank(sample["ground_truth"]):
        chat, no_n = chat + 1, no_n + 1  # context recall
    reference = sample["ground_truth"] or sample["answer"] or ""
    variable = sum(len(sample["question"]) + len(reference) + len(c) for c in contexts)
    return chat, no_n, embed, RAGAS_CP_FIXED_CHARS * len(contexts) + variable


def prompt_chars(requests: list[RecordedRequest], only: str | None = None) -> int:
    """Characters of all message contents of the chat requests (those of one judge if given)."""
    total = 0
    for r in requests:
        if r.path != CHAT:
            continue
        messages = r.body["messages"]
        if only is None or messages[0]["content"].startswith(only):
            total += sum(len(m["content"]) for m in messages)
    return total


def blank_claims_calls(requests: list[RecordedRequest]) -> int:
    """Empty texts sent to be split into claims: judge.score should skip them."""
    count = 0
    for r in requests:
        user = r.body["messages"][-1]["content"] if r.path == CHAT else ""
        match = re.search(r"<texts>(.*)</texts>", user, re.DOTALL)
        texts = json.loads(match.group(1)) if match else []
        count += sum(1 for text in texts if not text.strip())
    return count


def measure() -> list[Row]:
    """Replay every fixture sample and count what it sends."""
    samples = json.loads((FIXTURES / "samples.json").read_text(encoding="utf-8"))["samples"]
    lines = (FIXTURES / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    rows = []
    with FakeLLMServer(chat=recorded_chat(entries)) as server:
        for s in samples:
            server.reset()
            result = score_fixture(
                s,
                server.base_url,
                CORE,
                model="openai/judge-fixture",
                embedding_model="openai/embed-fixture",
            )
            if result.errors:
                raise SystemExit(f"{s['id']}: {result.errors}")
            requests = list(server.requests)
            rows.append(
                Row(
                    s["id"],
                    len(s["contexts"]),
                    server.count(CHAT),
                    server.count(EMBED),
                    prompt_chars(requests),
                    prompt_chars(requests, only=GRADING_JUDGE),
                    blank_claims_calls(requests),
                    *ragas_estimate(s),
                )
            )
    return rows


def total(rows: list[Row]) -> Row:
    """The sum of every count over the rows."""
    sums = {f.name: sum(getattr(r, f.name) for r in rows) for f in fields(Row)[1:]}
    return Row("TOTAL", **sums)


def main() -> None:
    """Print the per-sample table and the totals."""
    rows = measure()
    head = (
        f"{'sample':32} {'ctx':>3} | {'chat':>4} {'emb':>3} {'chars':>7} {'grade ch':>8} | "
        f"{'chat~':>5} {'no-n~':>5} {'emb~':>4} {'CP ch~':>7}"
    )
    print("judge: measured at the fake server (core metrics) | RAGAS: estimates (~)")
    print(head)
    for i, r in enumerate([*rows, total(rows)]):
        if i in (0, len(rows)):
            print("-" * len(head))
        print(
            f"{r.sample:32} {r.contexts:>3} | {r.chat:>4} {r.embed:>3} {r.chars:>7,} "
            f"{r.grade_chars:>8,} | {r.ragas_chat:>5} {r.ragas_chat_no_n:>5} "
            f"{r.ragas_embed:>4} {r.ragas_cp_chars:>7,}"
        )
    print(
        "\nchars: characters of all chat messages judge sent; grade ch: of its one grading "
        "call.\nchat~ / no-n~: RAGAS chat calls with n=3 / without n (estimate); CP ch~: "
        f"RAGAS context-precision prompt characters, {RAGAS_CP_FIXED_CHARS:,} fixed per "
        "context plus question, reference and context (estimate)."
    )
    wasted = total(rows).blank_claims
    if wasted:
        print(
            f"note: {wasted} of judge's chat requests were claims calls for an empty text "
            "(no answer or no ground truth), which judge.score should skip."
        )


if __name__ == "__main__":
    main()
