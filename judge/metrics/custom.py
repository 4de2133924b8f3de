"""Your own LLM-judged metric: a prompt, a pydantic output model, a scoring function.

    from pydantic import BaseModel
    from judge.metrics.custom import judged_metric

    class Rating(BaseModel):
        rating: int
        reason: str

    domain_accuracy = judged_metric(
        "domain_accuracy",
        prompt="<<<system>>>\\nRate 0-5 ...\\n<<<user>>>\\n<answer>{{answer}}</answer> ...",
        output=Rating,
        score=lambda r: r.rating / 5,
    )

The result is a `judge.metrics.registry.Metric`, the same kind of object as the built-in metrics:
it works in `judge.score`, `judge.evaluate`, `judge eval --metrics-module`, the cache and
replay (the prompt's hash is in the cache key), reports, `compare` and thresholds.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel

from judge.errors import JudgeError
from judge.llm.config import PromptRef
from judge.metrics.judgments import SampleJudgments
from judge.metrics.prompts import PromptError, load_prompt, parse_prompt
from judge.metrics.registry import BUILTIN, JUDGE_ERROR, Metric, MetricScore

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
        if math.isinf(value.value):
            _not_finite(name, repr(value.value))
        return value
    reason = None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        value, reason = value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise JudgeError(
            f"the scorer of metric {name!r} returned {type(value).__name__} "
            f"({value!r:.60}); return a number, (nan, 'reason') or MetricScore"
        )
    try:
        value = float(value)
    except OverflowError:
        value = None
    if value is None or math.isinf(value):
        _not_finite(name, "a number beyond a double" if value is None else repr(value))
    if math.isnan(value) and reason is None:
        raise JudgeError(
            f"the scorer of metric {name!r} returned NaN without a reason; "
            "return (float('nan'), 'why')"
        )
    return MetricScore(value, reason)


def _not_finite(name: str, shown: str) -> NoReturn:
    # inf would be written as `Infinity` (not JSON), make the mean inf and pass any gate
    raise JudgeError(
        f"the scorer of metric {name!r} returned {shown}; return a finite number, "
        "(nan, 'reason') or MetricScore"
    )


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

    async def compute(j: SampleJudgments) -> MetricScore:
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
        try:
            value = score(reply)
        except Exception as exc:  # the user's code: its failure is this metric's, not the run's
            return MetricScore(
                math.nan,
                JUDGE_ERROR,
                f"the scorer of metric {name!r} raised {type(exc).__name__}: {exc}",
            )
        return _as_score(name, value)

    return Metric(
        name,
        description or f"custom metric from prompt {parsed.name!r}",
        compute,
        higher_is_better=higher_is_better,
        variables=parsed.variables,
        version=parsed.version,
    )


def project_table(path: Path = Path("pyproject.toml")) -> dict[str, Any]:
    """The `[tool.judge]` table of a project's pyproject.toml ({} without one)."""
    if not path.is_file():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise JudgeError(f"{path}: cannot be read as TOML ({exc})") from None
    tool = config.get("tool", {})
    table = tool.get("judge", {}) if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise JudgeError(f"{path}: [tool.judge] must be a table")
    return table


def configured_modules(path: Path = Path("pyproject.toml")) -> list[str]:
    """Metric modules named in the project's pyproject.toml, [tool.judge] metrics-modules."""
    modules = project_table(path).get("metrics-modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise JudgeError(f"{path}: [tool.judge] metrics-modules must be a list of strings")
    return modules


def load_module(spec: str) -> list[Metric]:
    """The Metric objects defined at the top level of one Python file or importable module."""
    import importlib.util

    path = Path(spec)
    try:
        if path.suffix == ".py":
            if not path.is_file():
                raise JudgeError(f"--metrics-module {spec}: no such file")
            loader = importlib.util.spec_from_file_location(f"judge_custom_{path.stem}", path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(spec)
    except JudgeError:
        raise
    except Exception as exc:  # the user's module failed to import
        raise JudgeError(f"--metrics-module {spec}: {type(exc).__name__}: {exc}") from exc
    metrics = [v for v in vars(module).values() if isinstance(v, Metric)]
    if not metrics:
        raise JudgeError(
            f"--metrics-module {spec}: defines no metric "
            "(use judge.metrics.custom.judged_metric at the top level)"
        )
    return metrics
