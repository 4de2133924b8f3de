"""judge vs RAGAS side by side: requests, prompt characters and wall time on the same samples.

N samples (5 contexts each, a ground truth), the four core metrics (faithfulness,
answer_relevancy, context_precision with a reference, context_recall), both tools pointed
at one FakeLLMServer answering after LATENCY seconds, concurrency C for both. RAGAS runs in
its own virtualenv (bench/.ragas-venv, created on first use, then reused) through
bench/ragas/ragas_runner.py; judge runs in a subprocess of this script, so both start alike.
Goal: judge at most half of RAGAS's requests and prompt characters, and a lower wall time.

Run: python -m bench.ragas.vs_ragas [--samples 50] [--latency 0.2] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.speed.eval_speed import samples
from bench.support.venvs import BENCH, RAGAS_VENV, ensure_venv
from judge.testing import FakeLLMServer, Reply, heuristic_judge

HERE = Path(__file__).resolve().parent
VENV = RAGAS_VENV
RAGAS_VERSION = "0.4.3"
# langchain-community 0.4 dropped chat_models.vertexai, which ragas 0.4.3 imports.
PINS = [f"ragas=={RAGAS_VERSION}", "langchain-community==0.3.31"]
METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall")
CHAT, EMBED = "/v1/chat/completions", "/v1/embeddings"
SIGNATURE = "as specified in JSON Schema:\n"  # RAGAS's PydanticPrompt: output schema follows
INPUT = "\ninput: "  # ...and the data comes last, as indented JSON, before "Output: "


def _sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in re.split(r"[.。]", text) if s.strip()]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _supported(statement: str, context: str) -> int:
    """1 when one context (RAGAS joins them with newlines) holds all the statement's words."""
    return int(any(_words(statement) <= _words(c) for c in context.split("\n")))


def ragas_answer(body: dict[str, Any]) -> str | list[str | Reply]:
    """Answer RAGAS's prompts with the same heuristics `heuristic_judge` applies to judge's.

    The output model is named by the schema's title; its input is the prompt's last JSON.
    Anything unrecognised gets a minimal schema-valid object.
    """
    text = str(body["messages"][-1].get("content", ""))
    at, data_at = text.find(SIGNATURE), text.rfind(INPUT)
    if at < 0 or data_at < 0:
        return FakeLLMServer.schema_echo(body)
    decode = json.JSONDecoder().raw_decode
    title = decode(text, at + len(SIGNATURE))[0].get("title")
    data = decode(text, data_at + len(INPUT))[0]
    if title == "StatementGeneratorOutput":  # faithfulness, step 1
        return json.dumps({"statements": _sentences(data["answer"])})
    if title == "NLIStatementOutput":  # faithfulness, step 2: one verdict per statement
        verdicts = [
            {"statement": s, "reason": "word overlap", "verdict": _supported(s, data["context"])}
            for s in data["statements"]
        ]
        return json.dumps({"statements": verdicts})
    if title == "ResponseRelevanceOutput":  # answer_relevancy: n questions in one request
        answer = data["response"]
        sentences = _sentences(answer) or [answer]
        noncommittal = int(any(p in answer.lower() for p in ("don't know", "not sure")))
        return [
            json.dumps(
                {
                    "question": f"What about {sentences[i % len(sentences)]}?",
                    "noncommittal": noncommittal,
                }
            )
            for i in range(int(body.get("n") or 1))
        ]
    if title == "Verification":  # context_precision: one context per request
        shared = min(3, len(_words(data["question"]) & _words(data["context"])))
        return json.dumps({"reason": f"{shared} shared words", "verdict": int(shared >= 2)})
    if title == "ContextRecallClassifications":  # context_recall: reference sentences
        items = [
            {"statement": s, "reason": "word overlap", "attributed": _supported(s, data["context"])}
            for s in _sentences(data["answer"])
        ]
        return json.dumps({"classifications": items})
    return FakeLLMServer.schema_echo(body)


def chat(body: dict[str, Any]) -> str | list[str | Reply]:
    """judge's prompts (a system message first) -> heuristic_judge; the rest -> RAGAS's."""
    messages = body.get("messages") or [{}]
    if messages[0].get("role") == "system":
        return heuristic_judge(body)
    return ragas_answer(body)


def judge_worker(samples_path: str, base_url: str, concurrency: str, out_path: str) -> None:
    """Run judge.evaluate in this (child) process; write timings and scores as JSON."""
    import openai  # noqa: F401  # start-up, as in ragas_runner.py, not evaluation

    import judge

    rows = json.loads(Path(samples_path).read_text(encoding="utf-8"))
    start = time.perf_counter()
    result = judge.evaluate(
        rows,
        metrics=list(METRICS),
        llm=judge.LLM(model="openai/bench-judge", api_base=base_url, api_key="x"),
        embeddings=judge.Embeddings(model="openai/bench-embed", api_base=base_url, api_key="x"),
        concurrency=int(concurrency),
        progress=False,
    )
    seconds = time.perf_counter() - start
    scores = {m: [r.to_json()["scores"].get(m) for r in result.rows] for m in METRICS}
    report = {"version": judge.__version__, "eval_s": seconds, "scores": scores}
    Path(out_path).write_text(json.dumps(report), encoding="utf-8")


def ragas_python() -> Path:
    """The RAGAS virtualenv's python: reused when it has the pinned version, else made."""
    probe = "import ragas, langchain_openai; print(ragas.__version__)"
    return ensure_venv(VENV, PINS, probe, RAGAS_VERSION)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _kind(body: dict[str, Any]) -> str:
    """judge's prompts by their system message's first words; RAGAS's by output model."""
    messages = body.get("messages") or [{}]
    if messages[0].get("role") == "system":
        return " ".join(_text(messages[0].get("content")).split()[:2])
    text = _text(messages[-1].get("content"))
    at = text.find(SIGNATURE)
    if at < 0:
        return "other"
    return json.JSONDecoder().raw_decode(text, at + len(SIGNATURE))[0].get("title", "?")


def run_tool(name: str, command: list[str], server: FakeLLMServer, out: Path) -> dict[str, Any]:
    """Run one tool's child process against the (reset) server and collect its counts."""
    server.reset()
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=BENCH.parent)
    total = time.perf_counter() - start
    if done.returncode != 0 or not out.exists():
        sys.exit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    report = json.loads(out.read_text(encoding="utf-8"))
    chats = [r.body for r in server.requests if r.path.rstrip("/").endswith("chat/completions")]
    report.update(
        chat=server.count(CHAT),
        embed=server.count(EMBED),
        other=server.count() - server.count(CHAT) - server.count(EMBED),
        chars=sum(len(_text(m.get("content"))) for b in chats for m in b["messages"]),
        schema_chars=sum(
            len(json.dumps(b["response_format"])) for b in chats if b.get("response_format")
        ),
        n_over_1=Counter(
            _kind(b) == "ResponseRelevanceOutput" for b in chats if (b.get("n") or 1) > 1
        ),
        kinds=Counter(_kind(b) for b in chats),
        total_s=total,
    )
    return report


def main() -> None:
    if sys.argv[1:2] == ["--judge-worker"]:
        return judge_worker(*sys.argv[2:6])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    python = ragas_python()
    data = samples(args.samples)
    assert all(len(s["contexts"]) == 5 for s in data)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=chat) as server:
        root = Path(tmp)
        (root / "samples.json").write_text(json.dumps(data), encoding="utf-8")
        server.latency = args.latency
        common = [str(root / "samples.json"), server.base_url, str(args.concurrency)]
        runner = str(HERE / "ragas_runner.py")
        this = [sys.executable, "-m", "bench.ragas.vs_ragas"]
        j_cmd = [*this, "--judge-worker", *common, str(root / "judge.json")]
        r_cmd = [str(python), runner, *common, str(root / "ragas.json")]
        j = run_tool("judge", j_cmd, server, root / "judge.json")
        r = run_tool("RAGAS", r_cmd, server, root / "ragas.json")
    report(args, j, r)


def _mean(values: list[float | None]) -> tuple[float, int]:
    real = [v for v in values if v is not None and not math.isnan(v)]
    return (sum(real) / len(real) if real else math.nan), len(values) - len(real)


def _all_chars(tool: dict[str, Any]) -> int:
    return tool["chars"] + tool["schema_chars"]


def report(args: argparse.Namespace, j: dict[str, Any], r: dict[str, Any]) -> None:
    n = args.samples
    print(
        f"\n{n} samples x 5 contexts, metrics {', '.join(METRICS)}; fake server latency "
        f"{args.latency} s, concurrency {args.concurrency}; judge {j['version']}, RAGAS "
        f"{r['version']}\n"
    )
    rows = [
        ("chat requests", j["chat"], r["chat"], "d"),
        ("embedding requests", j["embed"], r["embed"], "d"),
        ("all requests", j["chat"] + j["embed"], r["chat"] + r["embed"], "d"),
        ("requests per sample", (j["chat"] + j["embed"]) / n, (r["chat"] + r["embed"]) / n, ".2f"),
        ("chat requests per sample", j["chat"] / n, r["chat"] / n, ".2f"),
        ("prompt characters", j["chars"], r["chars"], ",d"),
        ("... + response_format schemas", _all_chars(j), _all_chars(r), ",d"),
        ("wall time, evaluation (s)", j["eval_s"], r["eval_s"], ".2f"),
        ("wall time, with start-up (s)", j["total_s"], r["total_s"], ".2f"),
    ]
    print(f"{'':30}{'judge':>12}{'RAGAS':>12}{'judge/RAGAS':>13}")
    for label, a, b, fmt in rows:
        print(f"{label:30}{a:>12{fmt}}{b:>12{fmt}}{a / b if b else math.nan:>13.2f}")
    print(
        "(prompt characters: message contents; judge also sends its output schema as "
        "response_format, RAGAS writes it into the prompt text)\n"
        "(evaluation: the evaluate() call alone, imports before it excluded for both; with "
        "start-up: the whole child process, interpreter, imports and data loading included)"
    )
    if j["other"] or r["other"]:
        print(f"other requests: judge {j['other']}, RAGAS {r['other']}")
    for name, tool in (("judge", j), ("RAGAS", r)):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(tool["kinds"].items()))
        print(f"{name} chat requests by prompt: {kinds}")
    print(
        f"RAGAS requests with n=3: answer_relevancy {r['n_over_1'][True]} of {n}, other "
        f"prompts {r['n_over_1'][False]} (LangchainLLMWrapper sets n on the shared ChatOpenAI)\n"
    )
    print(f"{'mean score (NaN rows)':30}{'judge':>15}{'RAGAS':>15}")
    failed = []
    for metric in METRICS:
        cells = []
        for name, tool in (("judge", j), ("RAGAS", r)):
            mean, nans = _mean(tool["scores"][metric])
            cells.append(f"{mean:.3f} ({nans})")
            if nans == n:
                failed.append(f"{name} {metric}")
        print(f"{metric:30}{cells[0]:>15}{cells[1]:>15}")
    fully = sum(all(r["scores"][m][i] is not None for m in METRICS) for i in range(n))
    print(f"RAGAS samples with all four scores: {fully} of {n}; with a NaN: {n - fully}")
    requests = (j["chat"] + j["embed"]) / (r["chat"] + r["embed"])
    goals = [
        ("requests <= 1/2 of RAGAS", requests <= 0.5),
        ("prompt characters <= 1/2 of RAGAS", j["chars"] <= r["chars"] / 2),
        ("lower wall time (evaluation)", j["eval_s"] < r["eval_s"]),
    ]
    print("\n" + "\n".join(f"goal: {g}: {'met' if ok else 'MISSED'}" for g, ok in goals))
    if failed:
        sys.exit(f"no real scores (all NaN) for: {', '.join(failed)}")


if __name__ == "__main__":
    main()
