"""Your own LLM-judged metric: a prompt, a pydantic output model, a scoring function.

    from pydantic import BaseModel
    from judge.custom import judged_metric

    class Rating(BaseModel):
        rating: int
        reason: str

    domain_accuracy = judged_metric(
        "domain_accuracy",
        prompt="<<<system>>>\\nRate 0-5 ...\\n<<<user>>>\\n<answer>{{answer}}</answer> ...",
        output=Rating,
        score=lambda r: r.rating / 5,
    )

The result is a `judge.metrics.Metric`, the same kind of object as the built-in metrics:
it works in `judge.score`, `judge.evaluate`, `judge eval --metrics-module`, the cache and
replay (the prompt's hash is in the cache key), reports, `compare` and thresholds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from judge.errors import JudgeError
from judge.llm import PromptRef
from judge.metrics import BUILTIN, Metric, MetricScore
from judge.prompts import PromptError, load_prompt, parse_prompt
from judge.sample import Judgments

MISSING_FIELD = "missing_field"

Scorer = Callable[[Any], "float | tuple[float, str] | MetricScore"]


def _prompt(name: str, prompt: str | os.PathLike[str]) -> Any:
    if isinstance(prompt, str) and "<<<system>>>" in prompt:
        return parse_prompt(prompt, name)
    if not Path(prompt).is_file():
        raise PromptError(
            f"metric {name!r}: prompt {str(prompt)!r} is neither prompt text "
            "(with <<<system>>> and <<<user>>> sections) nor a file"
        )
    return load_prompt(prompt)


def _as_score(name: str, value: Any) -> MetricScore:
    """A scorer's return value as a MetricScore; anything but a number is a clear error."""
    if isinstance(value, MetricScore):
        return value
    reason = None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        value, reason = value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JudgeError(
            f"the scorer of metric {name!r} returned {type(value).__name__} "
            f"({value!r:.60}); return a number, (nan, 'reason') or MetricScore"
        )
    value = float(value)
    if math.isnan(value) and reason is None:
        raise JudgeError(
            f"the scorer of metric {name!r} returned NaN without a reason; "
            "return (float('nan'), 'why')"
        )
    return MetricScore(value, reason)


def judged_metric(
    name: str,
    *,
    prompt: str | os.PathLike[str],
    output: type[BaseModel],
    score: Scorer,
    description: str = "",
    higher_is_better: bool = True,
) -> Metric:
    """Define an LLM-judged metric.

    Args:
        name: the metric's name, as used in `metrics=[...]`, reports and thresholds.
        prompt: a prompt file path, or prompt text with `<<<system>>>` and `<<<user>>>`
            sections; `{{variable}}` takes the sample's field of that name (question,
            answer, contexts, ground_truth, id) or, in a dataset, the column of that name.
        output: the pydantic model the judge's reply must validate against.
        score: a pure function from the validated reply to a number, `(nan, reason)` or
            a `MetricScore`.
        description: one line for listings.
        higher_is_better: False for metrics where lower is better (compare uses it).
    """
    if name in BUILTIN or name.startswith("context_ndcg"):
        raise JudgeError(f"metric name {name!r} clashes with a built-in metric; choose another")
    parsed = _prompt(name, prompt)
    try:
        output.model_json_schema()
    except Exception as exc:
        raise JudgeError(
            f"metric {name!r}: the output model {output.__name__} has no JSON "
            f"schema ({exc}); use JSON-compatible field types"
        ) from None
    ref = PromptRef(name, parsed.version)

    async def compute(j: Judgments) -> MetricScore:
        values = {v: j.sample.value(v) for v in parsed.variables}
        absent = sorted(v for v, value in values.items() if value is None)
        if absent:
            return MetricScore(
                math.nan,
                MISSING_FIELD,
                f"metric {name!r} needs {', '.join(absent)}, which the sample lacks",
            )
        (reply,) = await j.session.chat(
            parsed.render(**values),
            output,
            prompt=ref,
            label=name,
            sample=j.sample.id,
            ledger=j.ledger,
        )
        j.evidence[name] = reply.model_dump(mode="json")
        return _as_score(name, score(reply))

    return Metric(
        name,
        description or f"custom metric from prompt {parsed.name!r}",
        compute,
        higher_is_better=higher_is_better,
        variables=parsed.variables,
        version=parsed.version,
    )
