"""Requests and prompt characters per accepted question of `judge testset build` on a
corpus of 200+ chunks, at a fake server with scripted replies (goal: at most 3.5 requests
per accepted question on average, issue 13).

The fake model rejects a share of the drafts on purpose (`--reject`, default 0.25: a
quote not in the chunk for some, a critic refusal for others, chosen by a hash of the
chunk), so the rounds that replace rejected drafts are counted too.

With --ragas, RAGAS 0.4.3's TestsetGenerator (in bench/.ragas-venv, made on first use)
builds the same number of questions at a fake server answering its prompts
(bench/ragas/ragas_testset_fake.py), twice: from judge's chunks (generate_with_chunks) and from
the documents (generate_with_langchain_docs, RAGAS's own splitting). Its requests per
returned question are printed beside judge's, with the ratio. RAGAS returns every
question it generates (no checks, no duplicate removal), so its count is of questions
returned, not of questions that would pass judge's checks.

Run: python -m bench.speed.testset_cost [--docs 40] [-n 60] [--reject 0.25] [--seed 0] [--ragas]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import tempfile
from pathlib import Path
from typing import Any

from judge.llm.config import LLM
from judge.testing import FakeLLMServer
from judge.testset import build, load_corpus
from tests.helpers.testset import Script, default_reply  # the scripted fake model of the tests

PLACES = ["Harbour", "Mill", "Castle", "River", "Station", "Market", "Garden", "Bridge"]
THINGS = ["ferry", "library", "museum", "tram line", "bakery", "school", "hospital", "park"]
ZH_PLACES = ["西湖", "东城", "南山", "北港", "江北", "河西"]
ZH_THINGS = ["茶馆", "图书馆", "博物馆", "公交线路", "菜市场", "体育馆"]


def paragraph(rng: random.Random, zh: bool) -> str:
    """One paragraph of made-up facts with names and numbers."""
    if zh:
        place, thing = rng.choice(ZH_PLACES), rng.choice(ZH_THINGS)
        year, count, price = rng.randint(1900, 2020), rng.randint(10, 900), rng.randint(2, 90)
        return (
            f"{place}{thing}建于 {year} 年，每天接待约 {count} 位访客，门票 {price} 元。"
            f"{place}{thing}周一不开放，节假日延长开放到晚上九点。"
            f"当地居民认为{place}{thing}是城市生活中不可缺少的一部分，每年都会举办纪念活动。"
        )
    place, thing = rng.choice(PLACES), rng.choice(THINGS)
    year, count, price = rng.randint(1850, 2020), rng.randint(10, 9000), rng.randint(2, 90)
    return (
        f"The {place} {thing} opened in {year} and now serves about {count} people a day. "
        f"A standard ticket costs {price} dollars, and children under five go free. "
        f"It is closed on Mondays, except in August, when the {place} {thing} opens daily. "
        f"Local historians say the {thing} changed how people in the {place} district lived."
    )


def write_corpus(folder: Path, docs: int, seed: int) -> None:
    """`docs` documents of 6 paragraphs each; every fifth document is Chinese."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for d in range(docs):
        zh = d % 5 == 4
        text = "\n\n".join(paragraph(rng, zh) for _ in range(6))
        (folder / f"doc{d:03d}.txt").write_text(text + "\n", encoding="utf-8")


def _share(text: str) -> float:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


WORDS = [
    "amber",
    "brisk",
    "cedar",
    "dune",
    "ember",
    "fjord",
    "glade",
    "heron",
    "iris",
    "jade",
    "kelp",
    "lumen",
    "maple",
    "nectar",
    "onyx",
    "pebble",
    "quartz",
    "raven",
    "sable",
    "thistle",
    "umber",
    "vale",
    "willow",
    "yarrow",
    "zephyr",
]
ZH_WORDS = list("甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥")
GENERATED = ("single_hop", "paraphrased", "negation", "calculation", "multi_hop", "unanswerable")


def _question(kind: str, data: dict[str, Any]) -> str:
    """A question unique to its chunks (the scripted defaults repeat themselves)."""
    source = data["chunks"][0] if kind == "multi_hop" else data["chunk"]
    rng = random.Random(source + kind)
    if any("\u4e00" <= c <= "\u9fff" for c in source):
        return "".join(rng.choices(ZH_WORDS, k=8)) + (
            "不是什么？" if kind == "negation" else "是什么？"
        )
    words = " ".join(rng.choices(WORDS, k=6))
    return f"Which is not {words}?" if kind == "negation" else f"What about {words}?"


def rejecting(reject: float) -> Any:
    """An override failing about `reject` of the drafts (half at the quote check, half at
    the critic) and giving every question its own wording."""

    def override(kind: str, data: dict[str, Any]) -> Any:
        if kind in GENERATED:
            reply = {**default_reply(kind, data), "question": _question(kind, data)}
            if (
                kind in ("single_hop", "paraphrased", "negation")
                and _share(data["chunk"]) < reject / 2
            ):
                reply["evidence"] = ["not in the chunk at all"]
            return reply
        if kind == "critic" and reject / 2 <= _share(json.dumps(data["chunks"])) < reject:
            return {**default_reply("critic", data), "self_contained": False}
        return None

    return override


RAGAS_PINS = ["ragas==0.4.3", "langchain-community==0.3.31", "rapidfuzz==3.14.6"]


def run_ragas(source: Path, n: int) -> dict[str, Any]:
    """RAGAS's TestsetGenerator on documents (a folder) or chunks (a .jsonl): its report,
    with the chat and embedding requests and prompt characters it sent."""
    import subprocess

    from bench.ragas.ragas_testset_fake import answer
    from bench.support.venvs import BENCH, RAGAS_VENV, ensure_venv

    here = BENCH / "ragas"  # ragas_testset_runner.py, run by the venv's python
    probe = "import ragas, rapidfuzz; print(ragas.__version__)"
    python = ensure_venv(RAGAS_VENV, RAGAS_PINS, probe, "0.4.3")
    with FakeLLMServer(chat=answer) as server, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ragas.json"
        runner = [str(python), str(here / "ragas_testset_runner.py"), str(source)]
        subprocess.run(
            [*runner, server.base_url, str(n), str(out)], cwd=here, check=True, capture_output=True
        )
        report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        report["chat"] = server.count("/v1/chat/completions")
        report["embeddings"] = server.count("/v1/embeddings")
        report["prompt_chars"] = sum(
            len(str(m.get("content", "")))
            for r in server.requests
            if isinstance(r.body, dict)
            for m in r.body.get("messages", [])
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("-n", type=int, default=60)
    parser.add_argument("--reject", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ragas", action="store_true", help="also run RAGAS's TestsetGenerator")
    args = parser.parse_args()
    ragas: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        write_corpus(Path(tmp) / "docs", args.docs, args.seed)
        corpus = load_corpus(Path(tmp) / "docs", chunk_size=400)
        with FakeLLMServer(chat=Script(rejecting(args.reject))) as server:
            llm = LLM(model="openai/fake", api_base=server.base_url, api_key="x", max_retries=0)
            result = build(corpus, llm=llm, n=args.n, seed=args.seed)
            chars = sum(
                len(str(m.get("content", "")))
                for r in server.requests
                for m in r.body.get("messages", [])
            )
            requests = server.count()
        if args.ragas:
            chunks = Path(tmp) / "chunks.jsonl"
            rows = [{"doc_id": c.doc_id, "text": c.text} for c in corpus.chunks]
            chunks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            ragas["judge's chunks"] = run_ragas(chunks, args.n)
            ragas["documents"] = run_ragas(Path(tmp) / "docs", args.n)
    accepted = len(result.items)
    reasons: dict[str, int] = {}
    for r in result.rejected:
        reasons[r.reason] = reasons.get(r.reason, 0) + 1
    by_call = {k: v["requests"] for k, v in result.usage["by_call"].items()}
    print(f"corpus: {len(corpus.chunks)} chunks ({len(corpus.seeds)} seeds), {args.docs} documents")
    print(f"asked {args.n}, accepted {accepted}, rejected {len(result.rejected)} {reasons}")
    print(f"requests: {requests} ({by_call})")
    print(f"requests per accepted question: {requests / accepted:.2f} (goal <= 3.5)")
    print(f"prompt characters per accepted question: {chars / accepted:,.0f}")
    per_question = requests / accepted
    for name, report in ragas.items():
        got = report["questions"]
        if report["error"] or not got:
            print(f"RAGAS {report['version']} on {name}: failed ({report['error']})")
            continue
        sent = report["chat"] + report["embeddings"]
        print(
            f"RAGAS {report['version']} on {name}: {got} questions returned "
            f"({report.get('unique_questions')} distinct), {report['chat']} chat + "
            f"{report['embeddings']} embedding requests = {sent / got:.2f} per question, "
            f"{report['prompt_chars'] / got:,.0f} prompt characters per question; "
            f"judge/RAGAS requests per question: {per_question / (sent / got):.2f} "
            f"(chat only: {per_question / (report['chat'] / got):.2f})"
        )


if __name__ == "__main__":
    main()
