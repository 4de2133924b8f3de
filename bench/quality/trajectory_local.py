"""trajectory_accuracy judged by a real (small, local) model: eight hand-written agent rows
whose tool calls differ from the expected ones (so each asks the judge), each labelled by
hand `sound` (the difference does not matter: another wording of an argument, the order of
independent reads, an extra lookup) or `unsound` (a needed step left out, an argument
asking for something else, a harmful call); plus two rows the deterministic scores settle
with no request. Prints each label beside the verdict and the judge's reason, the
agreement, and requests and prompt characters per judged row.

Run (8 requests, a few minutes on 2 CPU cores with the local model):
    bash ../shared/local-llm/local_llm.sh start qwen
    python -m bench.quality.trajectory_local --cache /tmp/trajectory-local.sqlite
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import judge
from bench.support.cache_cost import recorded_cost
from judge import LLM, Cache

WEATHER_Q = "What will the weather be in Lyon tomorrow?"
GEO = {"name": "geocode", "arguments": {"city": "Lyon"}}
FORECAST = {"name": "forecast", "arguments": {"lat": 45.76, "lon": 4.84, "days": 1}}

# (id, question, expected, called, answer, label); a called entry may carry an "output".
ROWS: list[tuple[str, str, list[dict[str, Any]], list[dict[str, Any]], str, str]] = [
    (
        "city_spelled_out",
        WEATHER_Q,
        [GEO, FORECAST],
        [
            {"name": "geocode", "arguments": {"city": "Lyon, France"}, "output": "45.76, 4.84"},
            {**FORECAST, "output": "sunny, 24 C"},
        ],
        "Tomorrow in Lyon: sunny, 24 C.",
        "sound",
    ),
    (
        "forecast_missing",
        WEATHER_Q,
        [GEO, FORECAST],
        [{**GEO, "output": "45.76, 4.84"}],
        "Lyon is at 45.76 N, 4.84 E.",
        "unsound",
    ),
    (
        "wrong_city",
        WEATHER_Q,
        [GEO, FORECAST],
        [
            {"name": "geocode", "arguments": {"city": "Paris"}, "output": "48.85, 2.35"},
            {
                "name": "forecast",
                "arguments": {"lat": 48.85, "lon": 2.35, "days": 1},
                "output": "rain",
            },
        ],
        "Tomorrow: rain.",
        "unsound",
    ),
    (
        "extra_search",
        "How long is the Rhone river?",
        [{"name": "search", "arguments": {"q": "Rhone river length"}}],
        [
            {"name": "search", "arguments": {"q": "Rhone"}, "output": "The Rhone is a river."},
            {
                "name": "search",
                "arguments": {"q": "Rhone river length"},
                "output": "The Rhone is 813 km long.",
            },
        ],
        "The Rhone is 813 km long.",
        "sound",
    ),
    (
        "harmful_delete",
        "Show me my last three orders.",
        [{"name": "list_orders", "arguments": {"limit": 3}}],
        [
            {"name": "list_orders", "arguments": {"limit": 3}, "output": "#12, #11, #10"},
            {"name": "cancel_order", "arguments": {"id": 12}, "output": "cancelled"},
        ],
        "Your last orders are #12, #11 and #10.",
        "unsound",
    ),
    (
        "reads_reordered",
        "Compare the prices of the blue and the red mug.",
        [
            {"name": "price", "arguments": {"item": "blue mug"}},
            {"name": "price", "arguments": {"item": "red mug"}},
        ],
        [
            {"name": "price", "arguments": {"item": "red mug"}, "output": "12 EUR"},
            {"name": "price", "arguments": {"item": "blue mug"}, "output": "10 EUR"},
        ],
        "The blue mug (10 EUR) is 2 EUR cheaper than the red one (12 EUR).",
        "sound",
    ),
    (
        "booked_before_checking",
        "Book a table for four on Friday at 8 pm if one is free.",
        [
            {"name": "availability", "arguments": {"day": "Friday", "time": "20:00", "people": 4}},
            {"name": "book", "arguments": {"day": "Friday", "time": "20:00", "people": 4}},
        ],
        [
            {
                "name": "book",
                "arguments": {"day": "Friday", "time": "20:00", "people": 2},
                "output": "booked",
            }
        ],
        "Booked: Friday at 8 pm.",
        "unsound",
    ),
    (
        "unit_converted",
        "Convert 5 miles to kilometres.",
        [{"name": "convert", "arguments": {"value": 5, "from": "mi", "to": "km"}}],
        [
            {
                "name": "convert",
                "arguments": {"value": 5, "from": "miles", "to": "kilometers"},
                "output": "8.05",
            }
        ],
        "5 miles is 8.05 km.",
        "sound",
    ),
]
# Settled with no request: the expected calls made as expected, and nothing called.
SETTLED = [
    ("same_calls", WEATHER_Q, [GEO, FORECAST], [GEO, FORECAST], "Sunny.", "sound"),
    ("nothing_called", WEATHER_Q, [GEO, FORECAST], [], "Probably sunny.", "unsound"),
]


def rows() -> list[dict[str, Any]]:
    """The rows as judge.evaluate reads them."""
    return [
        {
            "id": ident,
            "question": question,
            "answer": answer,
            "contexts": [],
            "expected_tools": expected,
            "tools_called": called,
        }
        for ident, question, expected, called, answer, _ in [*ROWS, *SETTLED]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="openai/qwen")
    parser.add_argument("--api-base", default="http://127.0.0.1:8089/v1")
    parser.add_argument("--cache", default="/tmp/trajectory-local.sqlite")
    parser.add_argument("--out", default="/tmp/trajectory-local")
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
        context_window=4096,
    )
    print("load:", Path("/proc/loadavg").read_text().strip())
    result = judge.evaluate(
        rows(), metrics=["trajectory_accuracy"], llm=llm, cache=Cache(args.cache), progress=False
    )
    result.write(args.out)
    labels = {ident: label for ident, *_, label in [*ROWS, *SETTLED]}
    right = judged = 0
    for row in result.rows:
        evidence = row.evidence.get("trajectory") or {}
        verdict = evidence.get("verdict", row.reasons.get("trajectory_accuracy"))
        how = f"settled {evidence['settled']}" if "settled" in evidence else "judged"
        print(f"{row.id:24} label {labels[str(row.id)]:8} got {verdict!s:8} ({how})")
        if "settled" not in evidence:
            judged += 1
            right += verdict == labels[str(row.id)]
            print(f"    reason: {evidence.get('reason', row.errors.get('trajectory_accuracy'))}")
    requests, characters = recorded_cost(args.cache)
    print(f"\njudged rows as labelled: {right}/{judged}")
    print(
        f"{requests} chat requests recorded for {judged} judged rows "
        f"({len(SETTLED)} settled with none); {characters / max(requests, 1):,.0f} prompt "
        "characters per request"
    )


if __name__ == "__main__":
    main()
