"""What judging a conversation costs: requests and prompt characters per assistant turn.

N deterministic synthetic conversations (user messages of ~15 words, answers of ~40 words
with 3-4 claims, 3 contexts of ~60 words and a ground truth per turn; one conversation of
the longest length cut to each shorter one, so the lengths share their first turns) are
judged by `judge.evaluate` as conversations and, turn by turn, as single-turn rows
(question = the user message, same answer, contexts and ground truth), against one
FakeLLMServer answering with `heuristic_judge`. Counted at the server: requests (chat and
embeddings) and prompt characters (the message contents sent to /v1/chat/completions),
divided by the number of assistant turns. Goal: a conversation turn at most 1.5x the
requests and the prompt characters of its single-turn row.

Then DeepEval's turn metrics (TurnFaithfulness, TurnContextualPrecision/Recall,
TurnRelevancy, KnowledgeRetention) on the same conversations, in bench/.deepeval-venv
(made on first use) through bench/quality/deepeval_runner.py, with a DeepEval custom model
sending each prompt to the same server with its output schema as response_format; the
server answers those with schema-valid JSON whose lists follow the prompt (one verdict per
claim, per document, per reference sentence).

Run: python -m bench.quality.conversation_cost [--conversations 10] [--turns 2,4,8,16]
     [--no-deepeval]
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import random
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import judge
from bench.support.venvs import DEEPEVAL_VENV, ensure_venv
from judge.testing import FakeLLMServer, heuristic_judge

HERE = Path(__file__).resolve().parent
DEEPEVAL_VERSION = "4.3.1"  # what `uv pip install --dry-run deepeval` resolved (Dec 2026)
CHAT, EMBED = "/v1/chat/completions", "/v1/embeddings"
SEED = 40
RAG = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
# judge metric -> the DeepEval turn metric of the same family
PAIRS = {
    "faithfulness": "TurnFaithfulness",
    "answer_relevancy": "TurnRelevancy",
    "context_precision": "TurnContextualPrecision",
    "context_recall": "TurnContextualRecall",
    "knowledge_retention": "KnowledgeRetention",
}

# ---------------------------------------------------------------- synthetic conversations

PRODUCTS = ["Aria kettle", "Nova blender", "Orbit router", "Lumen desk lamp", "Pulse speaker"]
CITIES = ["Lyon", "Porto", "Ghent", "Turin", "Leeds", "Bremen", "Tartu", "Brno"]
ASPECTS = ["delivery", "warranty", "refund", "setup", "battery", "pricing", "repair", "returns"]
CARRIERS = ["Colissimo", "DPD", "GLS", "UPS", "a local courier"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
# ~13-word fact sentences: four or five make a ~60-word context
FACTS = [
    "The {p} {a} service covers orders shipped to {c} within {n} business days.",
    "Customers in {c} can request {a} support for the {p} by phone on {d}.",
    "{a} requests for the {p} are handled by {k} in about {n} days.",
    "The {p} comes with {n} years of {a} cover when registered online.",
    "A {a} claim for the {p} needs the order number and a photo.",
    "Orders of the {p} placed before noon on {d} leave the warehouse that day.",
    "The {a} fee for the {p} is {n} euros outside the first month.",
    "Stores in {c} stock spare parts for the {p} and answer {a} questions.",
    "Our {a} team replies to emails about the {p} within {n} hours.",
    "The {p} manual explains {a} steps on page {n} with pictures.",
]
QUESTIONS = [
    "Hi, I live in {c} and bought the {p} last week; how do you handle {a}?",
    "Thanks. What about {a} for the {p} if I send it from {c}?",
    "Could you tell me how long {a} takes for my {p} here in {c}?",
    "And is there any fee for {a} on the {p}, or is it free?",
    "One more thing: who handles {a} for the {p} and when can I call?",
]


def _fact(rng: random.Random, product: str, aspect: str, city: str) -> str:
    template = rng.choice(FACTS)
    text = template.format(
        p=product,
        a=aspect,
        c=city,
        n=rng.randint(2, 14),
        d=rng.choice(DAYS),
        k=rng.choice(CARRIERS),
    )
    return text[0].upper() + text[1:]


def conversation(index: int, turns: int, seed: int = SEED) -> dict[str, Any]:
    """One synthetic support conversation of `turns` exchanges, the same for the same arguments.

    Each assistant answer repeats 3 sentences of its first two contexts (supported), and
    some answers add a sentence made of the user's words (supported by the conversation
    only) or an invented one; the contexts hold 4-5 facts each, the ground truth two of them.
    """
    rng = random.Random(f"{seed}/{index}")  # a string seed: stable across Python versions
    product, city = rng.choice(PRODUCTS), rng.choice(CITIES)
    messages: list[dict[str, Any]] = []
    truths: list[str] = []
    for t in range(turns):
        aspect = rng.choice(ASPECTS)
        question = rng.choice(QUESTIONS[1:] if t else QUESTIONS[:1])
        question = question.format(c=city, p=product, a=aspect)
        contexts_facts = [
            [_fact(rng, product, aspect, city) for _ in range(rng.choice([4, 5]))] for _ in range(3)
        ]
        used = contexts_facts[0][:2] + contexts_facts[1][:1]
        claims = rng.sample(used, 3)
        extra = rng.random()
        if extra < 0.3:  # supported only by what the user said
            claims.append(f"You live in {city} and bought the {product}.")
        elif extra < 0.45:  # invented
            claims.append(f"The {product} {aspect} desk also opens on Sundays in {city}.")
        answer = " ".join(claims)
        ground_truth = " ".join(contexts_facts[0][:2])
        truths.append(contexts_facts[0][0])
        messages.append({"role": "user", "content": question})
        messages.append(
            {
                "role": "assistant",
                "content": answer,
                "contexts": [" ".join(c) for c in contexts_facts],
                "ground_truth": ground_truth,
            }
        )
    # A conversation-level expected outcome for DeepEval (its turn precision/recall read it)
    reference = f"The customer in {city} got answers about the {product}. " + " ".join(truths[:3])
    return {"id": f"conv{index}", "turns": messages, "reference": reference}


def conversations(n: int, turns: int, seed: int = SEED) -> list[dict[str, Any]]:
    """N conversations of `turns` exchanges: the first `turns` of the longest ones."""
    return [conversation(i, turns, seed) for i in range(n)]


def single_rows(convs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each assistant turn as a single-turn row: the user message before it as the question."""
    rows = []
    for c in convs:
        turns = c["turns"]
        for k in range(1, len(turns), 2):
            answer = turns[k]
            rows.append(
                {
                    "id": f"{c['id']}#{k + 1}",
                    "question": turns[k - 1]["content"],
                    "answer": answer["content"],
                    "contexts": answer["contexts"],
                    "ground_truth": answer["ground_truth"],
                }
            )
    return rows


# ---------------------------------------------------------------- DeepEval's prompts

_LIST_BLOCK = re.compile(r"\[.*\]", re.S)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _section(text: str, header: str) -> str:
    """The text after the last `header` line, up to the next blank-line-separated header."""
    at = text.rfind(header)
    if at < 0:
        return ""
    rest = text[at + len(header) :]
    end = re.search(r"\n\s*\n(?=[A-Z][\w' ()]*:\s*\n)|\n\s*JSON:\s*$", rest)
    return rest[: end.start()] if end else rest


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip().rstrip(".") + "." for p in parts if p.strip(" .\n")]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _listed(text: str) -> list[Any]:
    """A Python or JSON list rendered into the prompt (jinja renders lists with repr)."""
    found = _LIST_BLOCK.search(text)
    if not found:
        return []
    try:
        value = ast.literal_eval(found.group(0))
    except (ValueError, SyntaxError):
        return []
    return value if isinstance(value, list) else []


def deepeval_answer(body: dict[str, Any]) -> str:
    """Answer DeepEval's prompts with JSON valid for the requested schema, lists as DeepEval needs.

    The schema (response_format) names the output model; the data is read from the prompt's
    sections. Verdicts are "yes" when the words are found, as `heuristic_judge` decides.
    """
    fmt = body.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema", {}) if isinstance(fmt, dict) else {}
    title = schema.get("title", "")
    item = ""
    if title == "Verdicts":
        ref = schema.get("properties", {}).get("verdicts", {}).get("items", {}).get("$ref", "")
        item = ref.rsplit("/", 1)[-1]
    prompt = _text((body.get("messages") or [{}])[-1].get("content"))
    if title == "Truths":
        return json.dumps({"truths": _sentences(_section(prompt, "REFERENCE CONTEXT:\n"))})
    if title == "Claims":
        return json.dumps({"claims": _sentences(_section(prompt, "ASSISTANT OUTPUT:\n"))})
    if item == "FaithfulnessVerdict":  # one per claim
        truths = _words(_section(prompt, "REFERENCE CONTEXT:\n"))
        claims = _listed(_section(prompt, "CLAIMS:\n"))
        verdicts = [
            {"verdict": "yes"}
            if _words(str(c)) <= truths
            else {"verdict": "borderline", "reason": "not in the truths"}
            for c in claims
        ]
        return json.dumps({"verdicts": verdicts})
    if item == "ContextualPrecisionVerdict":  # one per document
        count = re.search(r"Retrieval Context \((\d+) document", prompt)
        question = _words(_section(prompt, "User Message:\n"))
        docs = _listed(_section(prompt, "Retrieval Context"))
        n = int(count.group(1)) if count else len(docs)
        verdicts = [
            {
                "verdict": "yes"
                if i < len(docs) and len(question & _words(str(docs[i]))) >= 2
                else "no",
                "reason": "shares question words",
            }
            for i in range(n)
        ]
        return json.dumps({"verdicts": verdicts})
    if item == "ContextualRecallVerdict":  # one per expected-output sentence
        reference = _sentences(_section(prompt, "Assistant Output:\n"))
        context = _words(_section(prompt, "Retrieval Context:\n"))
        verdicts = [
            {"verdict": "yes" if _words(s) <= context else "no", "reason": "word overlap"}
            for s in reference
        ]
        return json.dumps({"verdicts": verdicts})
    if title == "Knowledge":  # the latest user message's facts
        said = _section(prompt, "Latest User Message:\n").strip()
        return json.dumps({"data": {"statement": said} if said else None})
    if title == "TurnRelevancyVerdict":  # "yes": relevant
        return json.dumps({"verdict": "yes", "reason": None})
    if title == "KnowledgeRetentionVerdict":  # "no": nothing forgotten or contradicted
        return json.dumps({"verdict": "no", "reason": None})
    if title.endswith("Reason"):
        return json.dumps({"reason": "The score follows from the verdicts."})
    return FakeLLMServer.schema_echo(body)


def chat(body: dict[str, Any]) -> str:
    """judge's prompts (a system message first) -> heuristic_judge; DeepEval's -> its shapes."""
    messages = body.get("messages") or [{}]
    if messages[0].get("role") == "system":
        return heuristic_judge(body)
    return deepeval_answer(body)


# ---------------------------------------------------------------- counting


def _kind(body: dict[str, Any]) -> str:
    """judge's prompts by their system message's first words; DeepEval's by output schema."""
    messages = body.get("messages") or [{}]
    if messages[0].get("role") == "system":
        return " ".join(_text(messages[0].get("content")).split()[:3])
    fmt = body.get("response_format") or {}
    return str(fmt.get("json_schema", {}).get("name", "?")) if isinstance(fmt, dict) else "?"


def _counts(requests: list[Any]) -> dict[str, Any]:
    chats = [r.body for r in requests if r.path.rstrip("/").endswith("chat/completions")]
    return {
        "chat": len(chats),
        "embed": sum(r.path.rstrip("/").endswith("embeddings") for r in requests),
        "chars": sum(len(_text(m.get("content"))) for b in chats for m in b["messages"]),
        "kinds": Counter(_kind(b) for b in chats),
        "kind_chars": Counter(
            {
                k: sum(
                    len(_text(m.get("content")))
                    for b in chats
                    if _kind(b) == k
                    for m in b["messages"]
                )
                for k in {_kind(b) for b in chats}
            }
        ),
    }


def judge_run(
    server: FakeLLMServer, rows: list[dict[str, Any]], metrics: list[str]
) -> dict[str, Any]:
    """One judge.evaluate on a reset server: its counts and the mean of each metric."""
    server.reset()
    result = judge.evaluate(
        rows,
        metrics=metrics,
        llm=judge.LLM(model="openai/bench-judge", api_base=server.base_url, api_key="x"),
        embeddings=judge.Embeddings(
            model="openai/bench-embed", api_base=server.base_url, api_key="x"
        ),
        concurrency=16,
        progress=False,
    )
    out: dict[str, Any] = _counts(list(server.requests))
    out["turns"] = len(result.rows)
    for m in metrics:
        values = [r.to_json()["scores"].get(m) for r in result.rows]
        real = [v for v in values if isinstance(v, float) and not math.isnan(v)]
        out[m] = (sum(real) / len(real)) if real else math.nan
    return out


def deepeval_python() -> Path:
    """DeepEval's virtualenv python: reused when it has the pinned version, else made."""
    probe = (
        "import os; os.environ['DEEPEVAL_TELEMETRY_OPT_OUT']='YES'; "
        "import deepeval; print(deepeval.__version__)"
    )
    return ensure_venv(DEEPEVAL_VENV, [f"deepeval=={DEEPEVAL_VERSION}"], probe, DEEPEVAL_VERSION)


def deepeval_run(
    server: FakeLLMServer, groups: dict[int, list[dict[str, Any]]], root: Path
) -> dict[str, Any]:
    """DeepEval's five turn metrics on every group, counted per metric and length."""
    python = deepeval_python()
    (root / "convs.json").write_text(json.dumps(groups), encoding="utf-8")
    server.reset()
    command = [
        str(python),
        str(HERE / "deepeval_runner.py"),
        str(root / "convs.json"),
        server.base_url,
        str(root / "deepeval.json"),
    ]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "DEEPEVAL_TELEMETRY_OPT_OUT": "YES"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=root, env=env)
    if done.returncode != 0:
        sys.exit(f"DeepEval failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    report = json.loads((root / "deepeval.json").read_text(encoding="utf-8"))
    by_tag: dict[str, list[Any]] = {}
    for r in server.requests:
        by_tag.setdefault(r.headers.get("x-bench-metric", "?"), []).append(r)
    report["counts"] = {tag: _counts(reqs) for tag, reqs in by_tag.items()}
    return report


# ---------------------------------------------------------------- report


def _kinds(counts: dict[str, Any], turns: int) -> str:
    """Requests and prompt characters per turn by prompt kind."""
    return ", ".join(
        f"{k!r} {v / turns:.2f} req {counts['kind_chars'][k] / turns:,.0f} ch"
        for k, v in sorted(counts["kinds"].items())
    )


def _per_turn(c: dict[str, Any], turns: int) -> tuple[float, float]:
    return (c["chat"] + c["embed"]) / turns, c["chars"] / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10)
    parser.add_argument("--turns", default="2,4,8,16", help="exchanges per conversation")
    parser.add_argument("--no-deepeval", action="store_true")
    args = parser.parse_args()
    lengths = [int(x) for x in args.turns.split(",")]
    groups = {t: conversations(args.conversations, t) for t in lengths}
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"{args.conversations} conversations per length, lengths {lengths} (exchanges); "
        f"judge {judge.__version__}; load average {' '.join(load)}"
    )
    sets = {m: [m] for m in RAG} | {"4 RAG metrics together": list(RAG)}
    table: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=chat) as server:
        for t, convs in groups.items():
            turns = args.conversations * t
            for name, metrics in sets.items():
                conv = judge_run(server, convs, metrics)
                single = judge_run(server, single_rows(convs), metrics)
                assert conv["turns"] == single["turns"] == turns, (conv["turns"], turns)
                table[(name, t)] = {"conv": conv, "single": single}
            table[("knowledge_retention", t)] = {
                "conv": judge_run(server, convs, ["knowledge_retention"])
            }
        deepeval = None if args.no_deepeval else deepeval_run(server, groups, Path(tmp))
    print_judge(table, lengths, args.conversations, list(sets))
    if deepeval is not None:
        print_deepeval(deepeval, table, lengths, args.conversations)
    print(f"\nload average after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


def print_judge(
    table: dict[tuple[str, int], dict[str, Any]], lengths: list[int], n: int, names: list[str]
) -> None:
    print("\njudge, per assistant turn: conversation vs the same turns as single-turn rows")
    head = f"{'metrics':24}{'turns':>6}{'req conv':>10}{'req single':>11}{'x':>6}"
    print(head + f"{'chars conv':>12}{'chars single':>13}{'x':>6}  goal <= 1.5x")
    for name in names:
        for t in lengths:
            conv, single = table[(name, t)]["conv"], table[(name, t)]["single"]
            rc, cc = _per_turn(conv, n * t)
            rs, cs = _per_turn(single, n * t)
            ok = rc <= 1.5 * rs and cc <= 1.5 * cs
            print(
                f"{name:24}{t:>6}{rc:>10.2f}{rs:>11.2f}{rc / rs:>6.2f}"
                f"{cc:>12,.0f}{cs:>13,.0f}{cc / cs:>6.2f}  {'met' if ok else 'MISSED'}"
            )
    for t in lengths:
        kr = table[("knowledge_retention", t)]["conv"]
        rc, cc = _per_turn(kr, n * t)
        print(f"{'knowledge_retention':24}{t:>6}{rc:>10.2f}{'-':>11}{'':>6}{cc:>12,.0f}{'-':>13}")
    print("(knowledge_retention has no single-turn counterpart: a turn alone has nothing to keep)")
    longest = lengths[-1]
    print(f"\nper turn by prompt (system message's first words), {longest} turns:")
    for name in ("faithfulness", "4 RAG metrics together"):
        for mode in ("conv", "single"):
            print(f"  {name}, {mode}: {_kinds(table[(name, longest)][mode], n * longest)}")
    print("\nmean scores (conversation / single):")
    for t in lengths:
        cells = []
        for m in RAG:
            both = table[("4 RAG metrics together", t)]
            cells.append(f"{m} {both['conv'][m]:.2f}/{both['single'][m]:.2f}")
        kr = table[("knowledge_retention", t)]["conv"]["knowledge_retention"]
        print(f"  {t:>2} turns: " + ", ".join(cells) + f", knowledge_retention {kr:.2f}")


def print_deepeval(
    report: dict[str, Any], table: dict[tuple[str, int], dict[str, Any]], lengths: list[int], n: int
) -> None:
    print(
        f"\nDeepEval {report['version']} turn metrics vs judge, per assistant turn, same "
        f"conversations (DeepEval: default settings, window_size 10, reasons on)"
    )
    print(
        f"{'judge / DeepEval':44}{'turns':>6}{'req judge':>10}{'req DE':>8}{'DE/judge':>9}"
        f"{'chars judge':>12}{'chars DE':>11}{'DE/judge':>9}"
        f"{'req DE-r':>9}{'chars DE-r':>11}{'DE-r/judge':>11}"
    )
    empty = {"chat": 0, "embed": 0, "chars": 0}
    for ours, theirs in PAIRS.items():
        for t in lengths:
            rd, cd = _per_turn(report["counts"].get(f"{theirs}@{t}", empty), n * t)
            rr, cr = _per_turn(report["counts"].get(f"{theirs}@{t}/noreason", empty), n * t)
            rj, cj = _per_turn(table[(ours, t)]["conv"], n * t)
            print(
                f"{ours + ' / ' + theirs:44}{t:>6}{rj:>10.2f}{rd:>8.2f}{rd / rj:>9.2f}"
                f"{cj:>12,.0f}{cd:>11,.0f}{cd / cj:>9.2f}{rr:>9.2f}{cr:>11,.0f}{cr / cj:>11.2f}"
            )
    print(
        "(judge: each metric asked alone, as conversations; its answer_relevancy requests "
        "include 1 embedding request per turn. DE-r: DeepEval with include_reason=False. "
        "The first DE/judge is of requests, the others of prompt characters)"
    )
    longest = lengths[-1]
    for theirs in PAIRS.values():
        c = report["counts"].get(f"{theirs}@{longest}")
        if c:
            print(f"DeepEval {theirs} per turn by schema, {longest} turns: ", end="")
            print(_kinds(c, n * longest))
    for tag, errors in sorted(report["errors"].items()):
        print(f"DeepEval errors in {tag}: {len(errors)}, e.g. {errors[0][:200]}")
    means = []
    for tag, scores in sorted(report["scores"].items()):
        if tag.endswith("/noreason"):
            continue
        real = [s for s in scores if s is not None]
        means.append(f"{tag} {sum(real) / len(real):.2f}" if real else f"{tag} none")
    print("DeepEval mean scores: " + ", ".join(means))
    print(f"DeepEval evaluation time: {report['eval_s']:.1f} s")
    if report["errors"]:
        sys.exit("DeepEval metrics failed: the counts above are incomplete")


if __name__ == "__main__":
    main()
