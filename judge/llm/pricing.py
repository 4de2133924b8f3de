"""Prices per token from litellm's price map, read as data (importing litellm takes seconds)."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

_MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def price_map() -> dict[str, Any]:
    """litellm's model price map from its package directory, or {} if it cannot be found."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    for location in spec.submodule_search_locations:
        path = Path(location) / _MAP_FILE
        if path.is_file():
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return data
    return {}


def openai_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD cost of one OpenAI call; None when the model is not in the price map."""
    entry = price_map().get(model)
    if not isinstance(entry, dict) or entry.get("litellm_provider") != "openai":
        return None
    try:
        return prompt_tokens * float(
            entry.get("input_cost_per_token") or 0.0
        ) + completion_tokens * float(entry.get("output_cost_per_token") or 0.0)
    except (TypeError, ValueError):
        return None


def token_prices(model: str) -> tuple[float, float] | None:
    """(USD per prompt token, USD per completion token) from litellm's price map, or None
    when the model (with or without its provider prefix) has no price there."""
    prices = price_map()
    for name in (model, model.split("/", 1)[-1]):
        entry = prices.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            try:
                return float(entry["input_cost_per_token"]), float(
                    entry.get("output_cost_per_token") or 0
                )
            except (TypeError, ValueError):
                return None
    return None


def context_window(model: str) -> int | None:
    """The model's input limit in tokens from the price map, or None when unknown."""
    prices = price_map()
    for name in (model, model.split("/", 1)[-1]):
        entry = prices.get(name)
        if isinstance(entry, dict):
            limit = entry.get("max_input_tokens") or entry.get("max_tokens")
            if isinstance(limit, int) and limit > 0:
                return limit
    return None


def estimate_tokens(text: str) -> int:
    """A quick token estimate: a CJK character is about one token, other text about four
    characters per token (tokenizers differ by model; this is for catching the obviously
    too long, not for billing)."""
    wide = sum(1 for c in text if "\u2e80" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af")
    return wide + (len(text) - wide + 3) // 4
