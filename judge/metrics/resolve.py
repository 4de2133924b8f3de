"""From what a user names to the metrics a run computes: one resolver for every entry point.

A metric is given as a name (`faithfulness`, `context_ndcg@5`, a plugin's), a
parameterised retrieval name (`ndcg@10`, `P@5`: computed by `judge.ir`, not judged) or a
`Metric` object (a custom metric; `--metrics-module` loads them by name into `custom`).
`choose_metrics` turns the lot into the LLM-judged metrics, the retrieval metric names
and the notes on defaults left out, or the error a user should see: an unknown name with
its closest match, a retrieval metric on data without retrieval columns, judged metrics
without a judge model, a metric that needs embeddings without them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from judge import ir
from judge.errors import InputFormatError, JudgeError, UnknownMetricError
from judge.ir.measure_names import MeasureFormError
from judge.metrics.registry import BUILTIN, DEFAULT_METRICS, Metric, get_metric, unknown_metric
from judge.metrics.tools import TOOL_METRICS

MetricLike = str | Metric
"""A metric as a user gives it: its name, or the `Metric` itself."""

NO_JUDGE_MODEL = "LLM-judged metrics need llm=judge.LLM(model=...)"


@dataclass(frozen=True)
class MetricChoice:
    """What a run computes: the LLM-judged metrics, the metrics computed from the row with
    no judge (retrieval metric names, trec_eval exact, from `retrieved_ids` and
    `relevance`; tool-call metrics from `tools_called` and `expected_tools`), and notes on
    default metrics left out."""

    judged: tuple[Metric, ...]
    retrieval: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """Every metric's name, judged ones first, as results and summaries list them."""
        return [m.name for m in self.judged] + list(self.retrieval)


def named_metric(name: str, others: Sequence[str] = ()) -> Metric:
    """A built-in metric, or else an installed plugin's (plugins are loaded only then);
    an unknown name's error suggests the closest of these, plugins' and `others`."""
    try:
        return get_metric(name)
    except UnknownMetricError:
        from judge.metrics.plugins import plugin_metrics

        plugins = plugin_metrics()
        if name in plugins:
            return plugins[name].metric
        raise unknown_metric(name, [*plugins, *others]) from None


def resolve_metrics(
    names: Sequence[MetricLike] | str | None,
    *,
    embeddings: bool,
    custom: Mapping[str, Metric] | None = None,
) -> list[Metric]:
    """The LLM-judged metrics from names or Metric objects (custom ones by name from
    `custom`); the default skips answer_relevancy when there are no embeddings."""
    if names is None:
        names = [m for m in DEFAULT_METRICS if embeddings or not BUILTIN[m].needs_embeddings]
    metrics: list[Metric] = []
    for item in _listed(names):
        if isinstance(item, Metric):
            metric = item
        elif custom and item in custom:
            metric = custom[item]
        else:
            metric = named_metric(item, list(custom or ()))
        if metric.name not in {m.name for m in metrics}:
            metrics.append(metric)
    for m in metrics:
        if m.needs_embeddings and not embeddings:
            raise JudgeError(f"{m.name} needs an embedding model: pass embeddings=Embeddings(...)")
    return metrics


def split_metrics(
    names: Sequence[MetricLike] | str | None, has_retrieval: bool
) -> tuple[list[MetricLike] | None, list[str]]:
    """(LLM-judged metrics or None for the default, the metrics computed from the row:
    retrieval metric names, and tool-call metrics)."""
    if names is None:
        return None, list(ir.DEFAULT_METRICS) if has_retrieval else []
    judged: list[MetricLike] = []
    retrieval: list[str] = []
    for name in _listed(names):
        if isinstance(name, Metric):
            judged.append(name)
            continue
        if name in TOOL_METRICS:  # computed from the row as retrieval metrics are, no judge
            retrieval.append(name)
            continue
        try:
            ir.parse_measure(name)
        except MeasureFormError:
            raise  # a retrieval metric written wrong (`ndcg@0`): its own message, no guess
        except UnknownMetricError:
            judged.append(name)
        else:
            retrieval.append(name)
    ranked = [name for name in retrieval if name not in TOOL_METRICS]
    if ranked and not has_retrieval:
        raise InputFormatError(
            f"{', '.join(ranked)} need retrieval columns: retrieved_ids (ranked doc ids) "
            "and relevance (relevant ids, or {doc_id: grade})"
        )
    return judged, retrieval


def choose_metrics(
    metrics: Sequence[MetricLike] | str | None,
    *,
    has_retrieval: bool,
    has_llm: bool,
    embeddings: bool,
    custom: Mapping[str, Metric] | None = None,
) -> MetricChoice:
    """The metrics a run computes, chosen once for every entry point (`judge.evaluate`,
    `judge eval`, its processes and shards, Ray).

    Args:
        metrics: names and `Metric` objects, a comma-separated string, or None for the
            default: the core LLM-judged metrics (answer_relevancy only with
            embeddings), plus `judge.ir`'s default metrics when the data has retrieval
            columns; without a judge model the default is the retrieval metrics alone.
        has_retrieval: whether the data has retrieval columns (`retrieved_ids`).
        has_llm: whether a judge model is given.
        embeddings: whether an embedding model is given.
        custom: metrics by name that `metrics` may name (`--metrics-module`'s).

    Raises:
        judge.errors.UnknownMetricError: a name no metric has (with the closest one).
        judge.errors.InputFormatError: retrieval metrics without retrieval columns, or
            judged metrics without a judge model.
        judge.errors.JudgeError: a metric needs embeddings and none is given.
    """
    judged_names, retrieval = split_metrics(metrics, has_retrieval)
    if not has_llm and judged_names is None and retrieval:
        judged_names = []  # no judge model given: the default is the retrieval metrics alone
    if not has_llm and (judged_names is None or judged_names):
        raise InputFormatError(NO_JUDGE_MODEL)
    if not has_llm:
        return MetricChoice((), tuple(retrieval))
    judged = resolve_metrics(judged_names, embeddings=embeddings, custom=custom)
    notes = _skipped_defaults(judged_names, embeddings)
    return MetricChoice(tuple(judged), tuple(retrieval), tuple(notes))


def _listed(names: Sequence[MetricLike] | str) -> Sequence[MetricLike]:
    if isinstance(names, str):
        return [n.strip() for n in names.split(",") if n.strip()]
    return names


def _skipped_defaults(names: Sequence[MetricLike] | None, embeddings: bool) -> list[str]:
    """Notes on the default metrics a judged run leaves out, so none goes without a word."""
    if names is not None or embeddings:
        return []
    return [
        "answer_relevancy, a default metric, was not computed: it needs an embedding model "
        "(pass embeddings=Embeddings(model=...))"
    ]
