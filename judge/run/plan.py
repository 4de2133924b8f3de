"""`RunPlan`: a run decided before any row is judged, the one value every executor runs.

`plan_run` makes it from what the user gives (the loaded rows and their columns, metrics
as names, objects, plugins or modules, the models, a shard): the metrics resolved once
(`judge.metrics.resolve.choose_metrics`), the built-in prompts read once, the custom
metrics' prompt variables checked against the columns, and the fingerprint that says
which checkpoint and which shards belong to this run. Executors (`judge.run.local`, the
processes of `judge.run.processes`, Ray in `judge.ray`) execute a plan and never choose
again; the plan's `config` is what summary.json records.

A plan pickles (for the processes of `judge eval --processes`): its metrics travel as
their names and the modules they came from, and are resolved again on arrival, which
fails if a metric's prompt changed in between.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.cache.identity import server_identity
from judge.errors import InputFormatError, JudgeError
from judge.json_values import canonical_json, sha256_hex
from judge.llm.config import LLM, Embeddings
from judge.metrics.prompts import Prompt, load_prompt_set, load_prompts
from judge.metrics.registry import Metric, higher_is_better
from judge.metrics.resolve import MetricChoice, MetricLike, choose_metrics
from judge.run.config import RunConfig, run_notes
from judge.run.data import Row
from judge.run.digest import row_hash
from judge.run.gates import Gates
from judge.run.inputs import InputRows
from judge.run.shard import Shard


@dataclass(frozen=True)
class RunPlan:
    """What decides a run's results besides the rows' inputs, decided once.

    Attributes:
        source: where the rows came from, as summary.json names it.
        columns: field -> the input column that holds it.
        metrics: the LLM-judged metrics and the retrieval metric names.
        llm: the judge model (None: retrieval metrics alone).
        embeddings: the embedding model, or None.
        prompts: the built-in prompts every row is judged with.
        fingerprint: a hash of the metrics, models, servers and prompt versions.
        data_rows: the number of input rows.
        data_sha256: a hash of every row's inputs, in order; None when the rows are read
            as the run goes (`judge.run.inputs.InputRows`): the executor computes it on
            the way (`DataDigest`) and records it in the config.
        shard: the rows this run judges (None: all of them).
        metric_modules: the files or modules custom metrics were loaded from
            (`--metrics-module`), so the plan can be sent to another process.
        prompt_set: the folder of prompt files that replaced built-in prompts
            (`judge eval --prompts`), or None; `prompts` holds what it read.
    """

    source: str
    columns: dict[str, str]
    metrics: MetricChoice
    llm: LLM | None
    embeddings: Embeddings | None
    prompts: dict[str, Prompt]
    fingerprint: str
    data_rows: int
    data_sha256: str | None
    shard: Shard | None = None
    metric_modules: tuple[str, ...] = ()
    prompt_set: str | None = None

    @property
    def names(self) -> list[str]:
        """Every metric's name, judged ones first."""
        return self.metrics.names

    def holds(self, row: Row) -> bool:
        """Whether this run judges the row (its shard holds it)."""
        if self.shard is None:
            return True
        by_conversation = self.shard.unit == "conversation" and row.unit is not None
        return self.shard.holds(row.unit if by_conversation else row.number)  # type: ignore[arg-type]

    def config(self, **recorded: Any) -> RunConfig:
        """The run's `RunConfig`: this plan's choices, plus what execution recorded
        (structured_output, cache, cache_mode, resumed_rows, seconds, notes, ray,
        cache_damaged, and data_sha256 when the plan has none); the plan's notes come
        first, then the replay hints (`judge.run.config.run_notes`)."""
        notes = run_notes(self.metrics.notes, recorded.pop("notes", []))
        data_sha256 = recorded.pop("data_sha256", None) or self.data_sha256
        if data_sha256 is None:
            raise ValueError("the plan's data hash is computed by its run: give data_sha256")
        return RunConfig(
            source=self.source,
            columns=dict(self.columns),
            metrics=self.names,
            model=self.llm.model if self.llm else None,
            embeddings=self.embeddings.model if self.embeddings else None,
            structured_output=recorded.pop("structured_output", None),
            prompts=prompt_versions(self.prompts),
            prompt_set=self.prompt_set,
            cache=recorded.pop("cache", None),
            cache_mode=recorded.pop("cache_mode", None),
            run=self.fingerprint,
            data_rows=self.data_rows,
            data_sha256=data_sha256,
            notes=notes,
            shard=self.shard,
            lower_is_better=own_lower_is_better(self.metrics.judged),
            **recorded,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        choice = fields.pop("metrics")
        judged = [(m.name, m.version) for m in choice.judged]
        return (_restored, (fields, judged, choice.retrieval, choice.notes))


def _restored(
    fields: dict[str, Any],
    judged: list[tuple[str, str]],
    retrieval: tuple[str, ...],
    notes: tuple[str, ...],
) -> RunPlan:
    """A plan sent to another process, its judged metrics resolved again by name (from
    the built-ins, the plugins and the plan's metric modules)."""
    from judge.metrics.plugins import extra_metrics
    from judge.metrics.resolve import named_metric

    custom = {n: x.metric for n, x in extra_metrics(fields["metric_modules"]).items()}
    metrics = []
    for name, version in judged:
        metric = custom[name] if name in custom else named_metric(name)
        if metric.version != version:
            raise JudgeError(
                f"metric {name!r} changed while the run was starting (its prompt's version "
                f"is {metric.version!r}, the run's {version!r}); run the command again"
            )
        metrics.append(metric)
    return RunPlan(metrics=MetricChoice(tuple(metrics), retrieval, notes), **fields)


def plan_run(
    rows: Sequence[Row] | InputRows | None,
    columns: Mapping[str, str],
    source: str,
    *,
    metrics: Sequence[MetricLike] | str | None = None,
    llm: LLM | None = None,
    embeddings: Embeddings | None = None,
    custom: Mapping[str, Metric] | None = None,
    shard: Shard | None = None,
    metric_modules: Sequence[str] = (),
    gates: Gates | None = None,
    prompts: str | os.PathLike[str] | None = None,
) -> tuple[RunPlan, list[str]]:
    """The plan of a run over loaded rows, and each row's input hash (for the checkpoint).

    Args:
        rows: the input rows (`judge.run.data.load_rows`); or `judge.run.inputs.InputRows`,
            read as the run goes: then no row is read here, the hashes are not returned
            and the plan's `data_sha256` is None (its run computes it); None when they
            are not here (a Ray dataset: the actors check each batch, and the plan holds
            no data hash).
        columns: field -> column, as `load_rows` resolved them.
        source: where the rows came from.
        metrics: names, `Metric` objects or None for the default, as for `judge.evaluate`.
        llm: the judge model; None for retrieval metrics alone.
        embeddings: the embedding model, or None.
        custom: metrics by name that `metrics` may name.
        shard: the rows to judge, or None for all.
        metric_modules: where `custom` came from (see `RunPlan.metric_modules`).
        gates: the gates the run will be held to: one naming a metric the run does not
            compute is refused here, before any row is judged.
        prompts: a prompt set (`judge.metrics.prompts.load_prompt_set`): its files replace
            the built-in prompts of their names for every row; None: the built-ins.

    Raises:
        judge.errors.UnknownMetricError, judge.errors.InputFormatError: as
            `judge.metrics.resolve.choose_metrics` raises them, or a custom metric's
            prompt reads a column the data lacks.
        judge.metrics.prompts.PromptError: the prompt set cannot be used.
    """
    choice = choose_metrics(
        metrics,
        has_retrieval="retrieved_ids" in columns,
        has_llm=llm is not None,
        embeddings=embeddings is not None,
        custom=custom,
    )
    if gates is not None:
        gates.check_metrics(choice.names, own_lower_is_better(choice.judged))
    if rows is not None:
        check_variables(list(choice.judged), rows)
    # The run's: every row, the fingerprint and the summary use them.
    chosen = load_prompts() if prompts is None else load_prompt_set(prompts)
    streamed = isinstance(rows, InputRows)
    if isinstance(rows, InputRows):  # turns of conversations: a shard holds whole ones
        shard = rows.shard_of(shard)
    hashes = [] if streamed else [row_hash(r) for r in rows or ()]
    plan = RunPlan(
        source=source,
        columns=dict(columns),
        metrics=choice,
        llm=llm,
        embeddings=embeddings,
        prompts=dict(chosen),
        fingerprint=run_fingerprint(choice, llm, embeddings, chosen),
        data_rows=len(rows) if streamed else len(hashes),  # type: ignore[arg-type]
        data_sha256=None if streamed else sha256_hex("".join(hashes)),
        shard=shard,
        metric_modules=tuple(metric_modules),
        prompt_set=None if prompts is None else os.fspath(prompts),
    )
    return plan, hashes


def own_lower_is_better(metrics: Iterable[Metric]) -> list[str]:
    """The metrics where lower is better that the built-ins' registry does not know as
    such (a user's own): the gates read their plain thresholds as caps."""
    return [m.name for m in metrics if not m.higher_is_better and higher_is_better(m.name)]


def check_variables(judged: list[Metric], rows: Sequence[Row] | InputRows) -> None:
    """A custom metric's prompt variable that no row can fill is an error before any call.

    Rows read as the run goes (`InputRows`) are not read here: the columns no field reads
    are the samples' extras (those of a row that cannot be read count too, where loaded
    rows count only readable rows' columns)."""
    known = {"question", "answer", "contexts", "ground_truth", "id"}
    if not any(metric.variables - known for metric in judged):
        return  # the rows are not read (they may be read from their file when used)
    if isinstance(rows, InputRows):
        present = known | set(rows.extra_columns())
    else:
        present = known | {k for r in rows if r.sample for k in r.sample.extra}
    for metric in judged:
        lacking = sorted(metric.variables - present)
        if lacking:
            raise InputFormatError(
                f"metric {metric.name!r} reads {', '.join(lacking)}, which the data has no "
                f"column for (columns: {', '.join(sorted(present))})"
            )


def run_fingerprint(
    metrics: MetricChoice,
    llm: LLM | None,
    embeddings: Embeddings | None,
    prompts: Mapping[str, Prompt] | None = None,
) -> str:
    """What decides the results besides the inputs: metrics, models and their servers,
    the versions of the built-in prompts (the run's, else as they are now)."""
    listed = [[m.name, m.version] for m in metrics.judged] + [[n, ""] for n in metrics.retrieval]
    versions = prompt_versions(prompts if prompts is not None else load_prompts())
    return sha256_hex(
        canonical_json(
            {
                "metrics": listed,
                "model": llm.model if llm else None,
                "embeddings": embeddings.model if embeddings else None,
                "servers": [
                    server_identity(c.model, c.api_base, c.cache_as) if c else None
                    for c in (llm, embeddings)
                ],
                "prompts": versions,
            }
        )
    )


def prompt_versions(prompts: Mapping[str, Prompt]) -> dict[str, str]:
    """Name -> version of a run's built-in prompts, as its summary and fingerprint hold them."""
    return {name: prompt.version for name, prompt in prompts.items()}
