"""Metric plugins: installed distributions that declare metrics in the `judge.metrics`
entry-point group, so installing the package is enough to use its metrics.

A plugin's pyproject.toml names a module of metrics, one Metric, or a list of Metrics:

    [project.entry-points."judge.metrics"]
    legal = "judge_legal.metrics"                 # every Metric at the module's top level
    # legal = "judge_legal.metrics:citation_check"  (one Metric)
    # legal = "judge_legal.metrics:ALL"             (a list or tuple of Metrics)

The modules named in `[tool.judge] metrics-modules` of ./pyproject.toml are code of the
checkout judge runs in, which may not be the user's: they are loaded only when asked
(`--trust-project-metrics`, `--metrics-module pyproject.toml`, or the environment variable
JUDGE_METRICS_MODULES), never just because judge was started in that folder.

Every extra metric (plugins, `--metrics-module`, `[tool.judge] metrics-modules`) must have a
name of its own: one that a built-in, a retrieval metric or another extra metric already
uses is an error naming both sources, never a silent override.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from judge import ir
from judge.errors import JudgeError, UnknownMetricError
from judge.metrics.custom import configured_modules, load_module
from judge.metrics.registry import Metric, get_metric

GROUP = "judge.metrics"
PROJECT = "pyproject.toml"  # a --metrics-module ending in .toml stands for its list
ENVIRONMENT = "JUDGE_METRICS_MODULES"  # files or modules, os.pathsep between them


@dataclass(frozen=True)
class SourcedMetric:
    """A metric beyond the built-ins, with where it came from.

    Attributes:
        metric: the metric.
        kind: "plugin" or "module".
        source: the distribution and entry point (plugins), or the file or module name.
        distribution: the plugin's distribution and version, e.g. "judge-legal 0.2".
    """

    metric: Metric
    kind: str
    source: str
    distribution: str = ""

    def describe(self) -> str:
        """Where the metric came from, in words."""
        if self.kind == "plugin":
            return f"plugin {self.source}"
        return f"--metrics-module {self.source}"


def metrics_in(value: Any) -> list[Metric] | None:
    """The metrics an entry point or module holds; None if it is none of the known shapes."""
    if isinstance(value, Metric):
        return [value]
    if isinstance(value, ModuleType):
        return [v for v in vars(value).values() if isinstance(v, Metric)]
    if isinstance(value, (list, tuple)) and all(isinstance(v, Metric) for v in value):
        return list(value)
    return None


def _distribution(entry: EntryPoint) -> str:
    dist = entry.dist
    return f"{dist.name} {dist.version}" if dist is not None else "an unknown distribution"


def _where(entry: EntryPoint) -> str:
    return f"{_distribution(entry)} (entry point {entry.name} = {entry.value})"


def _load(entry: EntryPoint) -> list[Metric]:
    """The metrics behind one entry point; a failure is an error naming the plugin."""
    dist = entry.dist.name if entry.dist is not None else entry.value.partition(".")[0]
    where = _where(entry)
    try:
        value = entry.load()
    except Exception as exc:  # the plugin's own code failed: say whose code it is
        raise JudgeError(
            f"the judge.metrics plugin {where} failed to load: {type(exc).__name__}: {exc}; "
            f"fix it or uninstall it (pip uninstall {dist})"
        ) from exc
    metrics = metrics_in(value)
    if not metrics:
        raise JudgeError(
            f"the judge.metrics plugin {where} holds no metric (it is a "
            f"{type(value).__name__}); point the entry point at a module of metrics, a Metric "
            f"or a list of Metrics (see judge.judged_metric), or uninstall it (pip uninstall "
            f"{dist})"
        )
    return metrics


def _taken(name: str) -> str | None:
    """What already owns `name` among the built-in and retrieval metrics, if anything."""
    try:
        get_metric(name)
        return "a built-in LLM-judged metric"
    except UnknownMetricError:
        pass
    try:
        ir.parse_measure(name)
        return "a retrieval metric"
    except UnknownMetricError:
        return None


def add_metric(found: dict[str, SourcedMetric], item: SourcedMetric) -> None:
    """Add one extra metric; a name that is already taken is an error naming both sources."""
    name = item.metric.name
    owner = _taken(name)
    if owner is None and name in found:
        if found[name].metric is item.metric:
            return  # the same object reached twice (one module re-exporting another's)
        owner = found[name].describe()
    if owner is not None:
        raise JudgeError(
            f"metric {name!r} from {item.describe()} clashes with {owner}; "
            "metric names must be unique: rename it, or uninstall or drop one of the two"
        )
    found[name] = item


def _plugins() -> dict[str, SourcedMetric]:
    found: dict[str, SourcedMetric] = {}
    for entry in entry_points(group=GROUP):
        for metric in _load(entry):
            add_metric(found, SourcedMetric(metric, "plugin", _where(entry), _distribution(entry)))
    return found


@functools.lru_cache(maxsize=4)
def _plugins_on(path: tuple[str, ...]) -> dict[str, SourcedMetric]:
    return _plugins()


def plugin_metrics() -> dict[str, SourcedMetric]:
    """The metrics of the installed plugins, by name.

    Entry points are read once per `sys.path` (scanning the installed distributions takes
    tens of milliseconds, and `judge.score` may resolve names once per sample).
    """
    return dict(_plugins_on(tuple(sys.path)))


def extra_metrics(modules: Iterable[str] = ()) -> dict[str, SourcedMetric]:
    """Every metric beyond the built-ins: from `modules` and the environment variable
    JUDGE_METRICS_MODULES (files or module names; a `.toml` file stands for the modules its
    `[tool.judge] metrics-modules` names), and from installed plugins.

    ./pyproject.toml's modules are loaded only when named that way (the CLI's
    `--trust-project-metrics` names it): otherwise one line on stderr says they were not.
    """
    found: dict[str, SourcedMetric] = {}
    named = [*modules, *(m for m in os.environ.get(ENVIRONMENT, "").split(os.pathsep) if m)]
    specs: list[str] = []
    trusted = False
    for spec in named:
        if spec.endswith(".toml"):
            path = Path(spec)
            if not path.is_file():
                raise JudgeError(f"--metrics-module {spec}: no such file")
            trusted = trusted or path.resolve() == Path(PROJECT).resolve()
            specs += [_beside(path, m) for m in configured_modules(path)]
        else:
            specs.append(spec)
    if not trusted:
        _note_untrusted(specs)
    for spec in dict.fromkeys(specs):
        for metric in load_module(spec):
            add_metric(found, SourcedMetric(metric, "module", spec))
    for item in plugin_metrics().values():
        add_metric(found, item)
    return found


def _beside(project: Path, spec: str) -> str:
    """A module named in a pyproject.toml: a relative .py path is taken from its folder."""
    if spec.endswith(".py") and not Path(spec).is_absolute():
        return str(project.parent / spec)
    return spec


def _same(spec: str) -> str:
    """One spelling of a module spec: a file as its absolute path."""
    return os.path.abspath(spec) if spec.endswith(".py") else spec


def _note_untrusted(specs: list[str]) -> None:
    """Say on stderr that ./pyproject.toml names metrics modules which are not loaded."""
    try:
        names = configured_modules(Path(PROJECT))
    except JudgeError:
        return  # unreadable or not a list: not judge's to complain about unless asked
    loaded = {_same(spec) for spec in specs}
    names = [name for name in names if _same(name) not in loaded]
    if names:
        print(
            f"judge: note: {PROJECT} names metrics modules ([tool.judge] metrics-modules: "
            f"{', '.join(names)}), not loaded: code of the folder judge runs in runs only "
            f"when asked; pass --trust-project-metrics (or set {ENVIRONMENT}) to use them",
            file=sys.stderr,
        )
