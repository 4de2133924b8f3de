"""Token usage and cost, counted per judge and summed for the run."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class Usage:
    """What one judge (or the whole run) used: requests, cache hits, tokens, cost."""

    requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    known_cost: float = 0.0
    unpriced_requests: int = 0  # requests of models missing from the price map
    last_call: dict[str, int] | None = field(default=None, repr=False, compare=False)

    @property
    def cost(self) -> float | None:
        """Total cost in USD; None when any request's price is unknown (never a false 0)."""
        return None if self.unpriced_requests else self.known_cost

    def add_response(self, response: Any, *, cost: float | None) -> None:
        """Count one provider response's tokens and cost (requests are counted as sent)."""
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.last_call = {"prompt_tokens": prompt, "completion_tokens": completion}
        if cost is None:
            self.unpriced_requests += 1
        else:
            self.known_cost += cost

    def as_dict(self) -> dict[str, Any]:
        """Plain numbers for reports (cost None when unknown)."""
        fields = self.__dict__  # not getattr: every row's usage is written per judge
        out: dict[str, Any] = {name: fields[name] for name in COUNTED}
        out["cost"] = None if out["unpriced_requests"] else out["known_cost"]
        return out


# The counted fields, in their order (dataclasses.fields is slow to ask for every row).
COUNTED = tuple(f.name for f in fields(Usage) if f.name != "last_call")
_COUNTS = tuple(name for name in COUNTED if name != "known_cost")  # the integers


class UsageSum:
    """Usage summed over a run's rows (each row's `usage.total`), the same in any order the
    rows are added: the counts are integers, and the cost is summed exactly (`math.fsum`),
    so a run resumed from its checkpoint sums what an uninterrupted one does."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(COUNTED, 0)
        self.costs = array("d")  # the rows' known costs that are not 0 (8 bytes each)

    def add(self, total: Mapping[str, Any]) -> None:
        """Add one row's `usage.total` (a row without one adds nothing)."""
        counts = self.counts
        for name in _COUNTS:
            counts[name] += total.get(name) or 0
        cost = total.get("known_cost") or 0.0
        if cost:
            self.costs.append(cost)

    def as_dict(self) -> dict[str, Any]:
        """The sum as `Usage.as_dict` gives it (the same keys, in the same order)."""
        usage = Usage()
        usage.__dict__.update(self.counts, known_cost=math.fsum(self.costs))
        return usage.as_dict()


class UsageLedger:
    """Usage per judge label, and the total over all of them."""

    def __init__(self) -> None:
        self.by_label: dict[str, Usage] = {}

    def of(self, label: str) -> Usage:
        """The usage record of one judge, created on first use."""
        usage = self.by_label.get(label)
        if usage is None:  # not setdefault: it would build a Usage on every call
            usage = self.by_label[label] = Usage()
        return usage

    def total(self) -> Usage:
        """The sum over all judges."""
        out = Usage()
        sums = out.__dict__  # not getattr and setattr: asked for every row
        for usage in self.by_label.values():
            fields = usage.__dict__
            for name in COUNTED:  # added in order, not sum(): floats add up as they always did
                sums[name] += fields[name]
        return out


class UsageRecorder:
    """Counts into several usage records at once: the run's and, say, one sample's."""

    def __init__(self, *usages: Usage):
        self.usages = usages

    def count(self, name: str, amount: int = 1) -> None:
        """Add to one counter (requests, cache_hits, retries, reasks) of every record."""
        for usage in self.usages:
            setattr(usage, name, getattr(usage, name) + amount)

    def add_response(self, response: Any, *, cost: float | None) -> None:
        """Count one provider response in every record."""
        for usage in self.usages:
            usage.add_response(response, cost=cost)

    @property
    def last_call(self) -> dict[str, int] | None:
        """Tokens of the latest response counted."""
        return self.usages[0].last_call
