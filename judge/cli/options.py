"""The option groups the commands share, and turning their arguments into judge's values:
the judge model and cache, columns, custom metrics, retrieval metric names, the gates."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from judge.errors import JudgeError
from judge.run.progress import DEFAULT_INTERVAL

if TYPE_CHECKING:  # imported when a command runs: `judge ir` must not load litellm
    from judge.cache.store import Cache, CacheMode
    from judge.llm.config import LLM, Embeddings
    from judge.metrics.registry import Metric
    from judge.metrics.resolve import MetricLike
    from judge.run.gates import Gates
    from judge.run.settings import Settings

# The default of --max-error-rate: see judge.run.outputs (kept in step by a test).
DEFAULT_MAX_ERROR_RATE = 0.05


def gate_options(p: argparse.ArgumentParser) -> None:
    """Add --gate, --fail-under, --max-error-rate and --allow-nan, the gates of a finished
    run (exit 1 and 3); `gates_of` reads them into one `judge.run.gates.Gates`."""
    p.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="'METRIC>=VALUE'",
        help="exit 1 unless the metric's mean is at least (METRIC>=VALUE) or at most "
        "(METRIC<=VALUE) VALUE, e.g. --gate 'faithfulness>=0.8' --gate "
        "'hallucination_rate<=0.05' (repeatable; quote it for the shell)",
    )
    p.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="exit 1 if the metric's mean is below VALUE, for a metric where higher is "
        "better: --gate 'METRIC>=VALUE' (repeatable); a metric where lower is better "
        "(hallucination_rate) takes --gate 'METRIC<=VALUE'",
    )
    p.add_argument(
        "--max-error-rate",
        type=float,
        default=DEFAULT_MAX_ERROR_RATE,
        metavar="RATE",
        help="exit 3 if judges failed (after retries) in more than this share of the "
        "judged rows, or rows could not be read in more than this share of all rows: "
        f"their scores are then missing from the means (default {DEFAULT_MAX_ERROR_RATE}; "
        "1 turns the check off; a --replay that misses fails whatever this says)",
    )
    p.add_argument(
        "--allow-nan",
        action="append",
        default=[],
        metavar="METRIC",
        help="gate the metric's mean over the rows it scored although some rows are "
        "undefined (no claims, no contexts, no ground truth); without it a gated metric "
        "with undefined rows misses its gate (exit 1), as a mean over the rest could stand "
        "on a few rows (repeatable or comma-separated)",
    )


def gates_of(args: argparse.Namespace) -> Gates:
    """The --gate, --fail-under, --max-error-rate and --allow-nan of a command, checked, as
    one value."""
    from judge.run.gates import CLI_WORDS, Gates

    floors: dict[str, float] = {}
    for item in args.fail_under:
        if item.partition("=")[0].rstrip().endswith(("<", ">")):  # a gate's syntax
            raise JudgeError(
                f"--fail-under {item!r}: write it as METRIC=VALUE (e.g. faithfulness=0.8), "
                f"or give it as --gate {item!r}"
            )
    for metric, value in _pairs(args.fail_under, "--fail-under").items():
        try:
            floors[metric] = float(value)
        except ValueError:
            raise JudgeError(
                f"--fail-under needs a number: {metric}={value} (e.g. faithfulness=0.8)"
            ) from None
    allowed = [m.strip() for item in args.allow_nan for m in item.split(",") if m.strip()]
    return Gates.of(
        args.gate,
        fail_under=floors,
        max_error_rate=args.max_error_rate,
        words=CLI_WORDS,
        allow_nan=allowed,
    )


def runs_path_option(p: argparse.ArgumentParser) -> None:
    """Add --runs PATH, the run store (`runs_path` reads it)."""
    p.add_argument(
        "--runs",
        metavar="PATH",
        help="the run store, an SQLite file of every recorded run (default: $JUDGE_RUNS if "
        "set, else .judge/runs.sqlite in the working directory)",
    )


def runs_options(p: argparse.ArgumentParser) -> None:
    """Add --runs, --name and --no-record: where and whether a finished run is recorded."""
    runs_path_option(p)
    p.add_argument("--name", metavar="NAME", help="a name for the run in the run store")
    p.add_argument(
        "--no-record",
        action="store_true",
        help="do not record the run in the run store (its outputs are written all the same)",
    )


def runs_path(args: argparse.Namespace) -> Path:
    """The run store of --runs, or the default (`judge.runs.store.default_runs_path`)."""
    from judge.runs.store import default_runs_path

    given = getattr(args, "runs", None)  # a command without runs_options: the default
    return Path(given) if given else default_runs_path()


def model_options(p: argparse.ArgumentParser) -> None:
    """The judge model, server, cache, request and column options of every judging command."""
    llm_options(p)
    column_option(p)
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (default: a live bar on a terminal, else a status line "
        "every --progress-interval seconds)",
    )
    p.add_argument(
        "--progress-interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between status lines when stderr is not a terminal, as in CI "
        f"(default {DEFAULT_INTERVAL:g})",
    )
    module_option(p)


def llm_options(p: argparse.ArgumentParser) -> None:
    """The model, server, cache (--replay) and request options of every LLM command; each
    not given is read from JUDGE_<NAME>, then ./pyproject.toml's [tool.judge], then the
    default of judge.LLM (`judge_options` reads them, through `judge.run.settings`)."""
    from judge.run.settings import BY_NAME

    def default(name: str) -> str:
        return f"{BY_NAME[name].default:g}" if name != "cache" else BY_NAME[name].default

    p.add_argument(
        "--model",
        help="judge model, any litellm name (e.g. openai/gpt-4o-mini); this option and those "
        "below not given are read from the environment (JUDGE_MODEL, JUDGE_CONCURRENCY, ...), "
        "then from ./pyproject.toml's [tool.judge] (model, concurrency, ...)",
    )
    p.add_argument("--api-base", help="server URL, e.g. http://localhost:8000/v1 for vLLM")
    p.add_argument("--api-key", help="API key (default: the provider's environment variable)")
    p.add_argument("--embedding-model", help="embedding model (needed for answer_relevancy)")
    p.add_argument("--embedding-api-base", help="embedding server URL (default --api-base)")
    p.add_argument("--cache", help=f"judgment cache (default {default('cache')})")
    cache_use = p.add_mutually_exclusive_group()
    cache_use.add_argument(
        "--replay",
        action="store_true",
        help="strict cache-only: never call a model; a missing judgment is an error",
    )
    cache_use.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the cache"
    )
    p.add_argument(
        "--cache-as",
        metavar="NAME",
        help="the server's identity in cache keys instead of its URL: the name a cache was "
        "recorded under, to replay it against a server at another address ('unknown' for "
        "entries from before servers were recorded; see `judge cache stats`)",
    )
    p.add_argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help="the judge model's input limit in tokens (default: litellm's price map; set it "
        "for a local model): a longer request is not sent, its metric a judge error",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        help=f"requests in flight (default {default('concurrency')})",
    )
    p.add_argument(
        "--timeout", type=float, help=f"seconds per request (default {default('timeout')})"
    )
    p.add_argument(
        "--max-retries",
        type=int,
        help="retries of a rate-limited, failed or timed-out request "
        f"(default {default('max_retries')})",
    )


def column_option(p: argparse.ArgumentParser) -> None:
    """Add --column FIELD=COLUMN, the mapping of input columns to judge's fields."""
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="map a column, e.g. --column question=query (repeatable)",
    )


def module_option(p: argparse.ArgumentParser) -> None:
    """Add --metrics-module, the route to custom metrics in a file or module, and
    --trust-project-metrics, the opt-in to those of ./pyproject.toml."""
    p.add_argument(
        "--metrics-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="a Python file or module defining custom metrics "
        "(judge.metrics.custom.judged_metric); repeatable; a .toml file stands for the "
        "modules its [tool.judge] metrics-modules names; also read from the environment "
        "variable JUDGE_METRICS_MODULES. Installed plugins (entry-point group judge.metrics) "
        "need no option",
    )
    p.add_argument(
        "--trust-project-metrics",
        dest="metrics_module",
        action="append_const",
        const="pyproject.toml",
        help="also load the metrics modules named in ./pyproject.toml ([tool.judge] "
        "metrics-modules): code of the folder you run in, never run without this option",
    )


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise JudgeError(f"{what} {item!r}: write it as NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def metric_names(args: argparse.Namespace) -> list[str] | None:
    """The comma-separated --metrics, or None (the default metrics) when none is given."""
    return [m for m in (args.metrics or "").split(",") if m.strip()] or None


def column_map(args: argparse.Namespace) -> dict[str, str] | None:
    """The --column FIELD=COLUMN pairs as a mapping, or None when none was given."""
    return _pairs(args.column, "--column") or None


class DataOptions(TypedDict):
    """The column and progress options of `model_options`, as `judge.evaluate` takes them."""

    column_map: dict[str, str] | None
    progress: bool
    progress_interval: float


def data_options(args: argparse.Namespace) -> DataOptions:
    """column_map, progress and progress_interval for `judge.evaluate`."""
    return {
        "column_map": column_map(args),
        "progress": not args.no_progress,
        "progress_interval": args.progress_interval,
    }


def custom_metrics(args: argparse.Namespace) -> dict[str, Metric]:
    """The metrics of --metrics-module (and JUDGE_METRICS_MODULES, and plugins) by name."""
    from judge.metrics.plugins import extra_metrics

    return {n: x.metric for n, x in extra_metrics(args.metrics_module).items()}


def chosen_metrics(
    names: list[str] | None, custom: Mapping[str, Metric]
) -> list[MetricLike] | None:
    """--metrics as the library takes them: a custom metric's name becomes its `Metric`
    (the library never looks names up in --metrics-module); a name that is no metric at
    all is an unknown metric here, its did-you-mean reaching the custom names too."""
    from judge.metrics.resolve import named_metric, split_metrics

    if names is None:
        return None
    judged = split_metrics(names, has_retrieval=True)[0] or []  # a bad cutoff is raised here
    for name in judged:
        if isinstance(name, str) and name not in custom:
            named_metric(name, list(custom))  # an unknown name's error, with a did-you-mean
    return [custom.get(name, name) for name in names]


def metrics_given(args: argparse.Namespace) -> list[MetricLike] | None:
    """--metrics with --metrics-module's metrics as objects (`chosen_metrics`)."""
    return chosen_metrics(metric_names(args), custom_metrics(args))


@dataclass(frozen=True)
class JudgeOptions:
    """The `llm_options` of a command, read once: the resolved settings (flags, then
    JUDGE_*, then [tool.judge], then judge.LLM's defaults), the key and the cache's use.

    Attributes:
        settings: the model, server, cache and request settings.
        api_key: --api-key, else JUDGE_API_KEY, else None (the provider's variable).
        replay: --replay: judgments only from the cache.
        no_cache: --no-cache: no cache at all.
    """

    settings: Settings
    api_key: str | None
    replay: bool
    no_cache: bool

    @property
    def cache(self) -> str:
        """The cache file."""
        return self.settings.cache

    @property
    def cache_mode(self) -> CacheMode:
        """How the cache is used: "replay" or "read-write"."""
        return "replay" if self.replay else "read-write"

    def absolute(self) -> JudgeOptions:
        """The same options with the cache's path made absolute (before an app that may
        change the working directory runs)."""
        settings = dataclasses.replace(self.settings, cache=os.path.abspath(self.cache))
        return dataclasses.replace(self, settings=settings)

    def models(self) -> tuple[LLM | None, Embeddings | None]:
        """(LLM or None, Embeddings or None), with no cache opened and nothing called; the
        LLM is None when no model is set."""
        s = self.settings
        if s.embedding_api_base and not s.embedding_model:
            raise JudgeError("--embedding-api-base needs --embedding-model (the embedding model)")
        if s.context_window is not None and s.context_window < 1:
            raise JudgeError(f"--context-window {s.context_window}: give a number of tokens")
        return s.llm(self.api_key), s.embeddings(self.api_key)

    def open(self) -> tuple[LLM, Embeddings | None, Cache | None]:
        """(LLM, Embeddings or None, the opened Cache or None); a model is required."""
        from judge.cache.store import Cache

        if not self.settings.model:
            raise JudgeError("--model is required (the judge model; there is no default)")
        llm, embeddings = self.models()
        assert llm is not None  # a model is set
        if self.replay and not self.no_cache and not Path(self.cache).is_file():
            # Nothing to replay from; creating an empty file would only hide the mistake.
            raise JudgeError(
                f"--cache {self.cache} does not exist: --replay reads judgments recorded "
                "before. Give the --cache that holds them, or record them first with a run "
                "without --replay"
            )
        cache = None if self.no_cache else Cache(self.cache, mode=self.cache_mode)
        return llm, embeddings, cache


def judge_options(args: argparse.Namespace) -> JudgeOptions:
    """The `llm_options` of the command line as a `JudgeOptions`; a server named only by
    ./pyproject.toml's [tool.judge] is not used (said on stderr): the folder a command
    runs in does not choose where the user's API key is sent."""
    import sys

    from judge.formatting import terminal_text
    from judge.run.settings import SETTINGS, ignored_servers, resolve_settings

    pyproject = Path("pyproject.toml")
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    settings = resolve_settings(flags, pyproject=pyproject, file_servers=False)
    for key in ignored_servers(pyproject, settings):
        flag = f"--{key}"
        print(
            terminal_text(
                f"judge: note: {pyproject} [tool.judge] {key} is not used: a project's file "
                f"does not choose where your API key is sent; give {flag} or "
                f"JUDGE_{key.upper().replace('-', '_')}"
            ),
            file=sys.stderr,
        )
    return JudgeOptions(
        settings=settings,
        api_key=args.api_key or os.environ.get("JUDGE_API_KEY") or None,
        replay=bool(getattr(args, "replay", False)),
        no_cache=bool(getattr(args, "no_cache", False)),
    )


def model_config(args: argparse.Namespace) -> tuple[LLM, Embeddings | None, Cache | None]:
    """(LLM, Embeddings or None, Cache or None) from the `model_options` arguments."""
    return judge_options(args).open()


def models_of(args: argparse.Namespace) -> tuple[LLM | None, Embeddings | None]:
    """(LLM or None, Embeddings or None) from the `model_options` arguments, with no cache
    opened and nothing called; the LLM is None when no model is set."""
    return judge_options(args).models()


def check_retrieval_only(metrics: Sequence[MetricLike] | None) -> None:
    """Without --model only retrieval metrics can be computed: an error naming the
    metrics that need a judge model, if any are asked for (or the default is).

    Give the metrics as `chosen_metrics` returns them: a name that is no metric at all
    (`recal@10`) was refused there, as an unknown metric with a did-you-mean.
    """
    from judge.metrics.resolve import split_metrics

    judged = split_metrics(metrics, has_retrieval=True)[0]
    if judged is None:
        raise JudgeError(
            "--model is required: the default metrics are LLM-judged (there is no default "
            "judge model); for a retrieval-only run give only retrieval metrics, e.g. "
            "--metrics ndcg@10,recall@10"
        )
    if judged:
        listed = ", ".join(m if isinstance(m, str) else m.name for m in judged)
        raise JudgeError(
            f"--model is required: {listed} "
            f"{'is' if len(judged) == 1 else 'are'} LLM-judged (there is no default judge "
            "model); for a retrieval-only run give only retrieval metrics, e.g. --metrics "
            "ndcg@10,recall@10"
        )


def metric_option(p: argparse.ArgumentParser, help_text: str) -> None:
    """Add -m/--metric METRIC, repeatable or comma-separated (`metrics_of` reads it)."""
    p.add_argument(
        "-m", "--metric", action="append", dest="metrics", metavar="METRIC", help=help_text
    )


def metrics_of(args: argparse.Namespace) -> list[str]:
    """The -m/--metric names, comma-separated lists split; [] when none is given."""
    return [m for item in args.metrics or [] for m in item.split(",") if m.strip()]


def trace_source_options(p: argparse.ArgumentParser) -> None:
    """Add --from and --map, how traces are read (also `judge eval`'s)."""
    p.add_argument(
        "--from",
        dest="source",
        choices=["otlp", "phoenix", "langfuse"],
        help="the traces' format: otlp (the OTel Collector's files: OTLP/JSON lines or "
        "protobuf, gzip of either), phoenix (Phoenix's spans dataframe as parquet) or "
        "langfuse (Langfuse's observations, or traces with their observations, as JSON or "
        "JSONL); default: told from each file's content",
    )
    p.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=ATTRIBUTE",
        help="read a field from a span attribute of custom instrumentation, e.g. --map "
        "question=app.query (repeatable; fields: question, answer, contexts, retrieved_ids, "
        "retrieved_scores, session_id); the first span, from the root down, that has the "
        "attribute gives it",
    )


def trace_mapping(items: list[str]) -> dict[str, str]:
    """The --map FIELD=ATTRIBUTE pairs, checked."""
    from judge.traces.rows import MAPPABLE

    mapping = {}
    for item in items:
        field, sep, attribute = item.partition("=")
        field, attribute = field.strip(), attribute.strip()
        if not sep or not field or not attribute:
            raise JudgeError(
                f"--map {item!r}: write it as FIELD=ATTRIBUTE, e.g. question=app.query"
            )
        if field not in MAPPABLE:
            raise JudgeError(f"--map {item!r}: {field!r} is not one of {', '.join(MAPPABLE)}")
        mapping[field] = attribute
    return mapping


def destination_options(p: argparse.ArgumentParser) -> None:
    """Where a run's scores on traces go: --otlp-json, --export-otlp, --phoenix, and the
    --threshold of their pass/fail labels (`judge traces export`, and `judge eval` of a
    trace file)."""
    p.add_argument(
        "--otlp-json",
        metavar="FILE",
        help="write the events as OTLP JSON lines (one ExportLogsServiceRequest per line, "
        "the OpenTelemetry Collector's file exporter format, read by its otlpjsonfile receiver)",
    )
    p.add_argument(
        "--export-otlp",
        metavar="URL",
        help="send the events with the OpenTelemetry SDK's OTLP/HTTP log exporter (pip "
        "install 'judge[otel]'): a collector's address such as http://localhost:4318 (the "
        "path /v1/logs is added) or a full logs URL; headers from OTEL_EXPORTER_OTLP_HEADERS",
    )
    p.add_argument(
        "--phoenix",
        metavar="FILE",
        help="write Phoenix span evaluations to a .parquet file (columns name, span_id, "
        "score, label, explanation, annotator_kind): "
        "Client().spans.log_span_annotations_dataframe(dataframe=pd.read_parquet(FILE))",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="label the metric's events pass or fail against VALUE, on the metric's good "
        "side (hallucination_rate passes at or below it); without one, no label (repeatable)",
    )


def threshold_map(items: list[str]) -> dict[str, float]:
    """The --threshold METRIC=VALUE pairs as numbers by metric."""
    out: dict[str, float] = {}
    for item in items:
        metric, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not metric.strip() or not math.isfinite(number):
            raise JudgeError(
                f"--threshold {item!r}: write it as METRIC=NUMBER, e.g. faithfulness=0.8"
            )
        out[metric.strip()] = number
    return out


def destinations(args: argparse.Namespace) -> bool:
    """Whether the command line says where scores on traces go."""
    return bool(args.otlp_json or args.export_otlp or args.phoenix)


def check_destinations(args: argparse.Namespace) -> None:
    """The destinations' arguments checked before anything is judged or read."""
    if args.phoenix and Path(args.phoenix).suffix != ".parquet":
        raise JudgeError(f"--phoenix {args.phoenix}: give a .parquet file")
    threshold_map(args.threshold)
