"""Library errors in the command line's words: a Python keyword argument becomes its flag.

The library's messages name what a Python caller passes (`column_map=`, `embeddings=
Embeddings(...)`, `model='openai/x'`); the CLI shows the same message with the flag that
sets it (`--column`, `--embedding-model`, `--model openai/x`). One table, applied to every
error `judge` prints (`judge.cli.main`), so no message is written twice.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

# keyword argument -> the flag that gives it (the judging commands' options, judge.cli.options)
FLAGS = {
    "llm": "--model",
    "model": "--model",
    "embeddings": "--embedding-model",
    "api_key": "--api-key",
    "api_base": "--api-base",
    "cache_as": "--cache-as",
    "cache": "--cache",
    "column_map": "--column",
    "metrics": "--metrics",
    "concurrency": "--concurrency",
    "timeout": "--timeout",
    "max_retries": "--max-retries",
    "app": "--app",
    "app_concurrency": "--app-concurrency",
    "app_timeout": "--app-timeout",
    "qrels": "--qrels",
    "runs": "--runs",
    "shard": "--shard",
    "thresholds": "--threshold",  # judge traces export
    # judge estimate
    "labels": "--labels",
    "label": "--label",
    "metric": "--metric",
    "confidence": "--confidence",
    "annotator": "--annotator",
    "require_random": "--require-random",
    "label_metric": "--label-metric",  # judge eval --labels, judge compare --labels-a
    "labels_a": "--labels-a",
    "labels_b": "--labels-b",
    "budget": "--budget",  # judge monitor
    "baseline_windows": "--baseline-windows",
    "baseline_run": "--baseline-run",
    "keep_traces": "--keep-traces",
    # judge plan
    "difference": "--difference",
    "power": "--power",
    "alpha": "--alpha",  # judge monitor's flag too
    "pair_correlation": "--pair-correlation",
    "tests": "--tests",
    "half_width": "--half-width",
    "judge_correlation": "--judge-correlation",
    "rows": "--rows",
}
# Keyword arguments of the Embeddings(...) constructor, which have flags of their own.
_EMBEDDINGS = {"model": "--embedding-model", "api_base": "--embedding-api-base"}

_QUOTED = r"'(?:[^'\\]|\\.)*'"
_CALL = r"[A-Za-z_][\w.]*\((?:[^()]|\([^()]*\))*\)"  # Embeddings(...), judge.LLM(model=...)
_DICT = r"\{[^{}]*\}"  # column_map={'question': ...}
# A keyword starts the text or follows a space, "(" or a backtick (never a path's "/" or a
# query's "?"/"&"), and takes a value judge writes (quoted, a call, a dict) or none: what
# follows "=" otherwise (`model=qwen2.5` from a server, `/data/model=gpt4/`) is not ours.


@functools.lru_cache(maxsize=4)
def _keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    """The pattern of `keywords=...` in a message (see the comment above)."""
    return re.compile(
        rf"(?<![^\s(`])(?P<kw>{'|'.join(keywords)})="
        rf"(?:(?P<value>{_QUOTED}|{_CALL}|{_DICT}|\.\.\.)|(?=[\s),;]|$))"
        # "api_key= (--api-key)", "cache_as='x' (--cache-as x)": both words given; keep the flag
        r"(?P<flag> \(--[\w-]+(?: [^()]+)?\))?"
    )


_EMBEDDINGS_ARG = re.compile(rf"\bEmbeddings\((?P<kw>model|api_base)=(?P<value>{_QUOTED})\)")
# Plain words naming a keyword without "=", as the column errors do.
_PHRASES = (
    ("column_map key", "--column field"),
    ("column_map:", "--column:"),
    ("fail_under:", "--fail-under:"),
    ("max_error_rate ", "--max-error-rate "),
    ("relevance_level ", "--relevance-level "),  # judge ir, judge compare: -l
    ("baseline_other_judge=True", "--baseline-other-judge"),  # judge monitor
)
_SAFE = re.compile(r"[\w./@:+,-]*\w[\w./@:+,-]*")  # shown without quotes: no shell meaning


def _value(quoted: str) -> str:
    """A quoted value as a flag's argument: unquoted when the shell would take it as is."""
    inner = quoted[1:-1]
    return inner if _SAFE.fullmatch(inner) else quoted


def _keyword(match: re.Match[str], flags: Mapping[str, str]) -> str:
    kw, value = match.group("kw"), match.group("value")
    flag = flags[kw]
    if value == "...":
        return f"{flag} ..."
    if value is None or not value.startswith(("'", "{")):  # none, or a call: the flag alone
        return flag
    if value.startswith("{"):  # column_map={'contexts': 'docs'} -> --column contexts=docs
        pairs = re.findall(rf"'(\w+)'\s*:\s*({_QUOTED})?", value)
        return (
            " ".join(f"{flag} {field}={_value(v) if v else 'COLUMN'}" for field, v in pairs) or flag
        )
    return f"{flag} {_value(value)}"


def cli_words(
    message: str,
    flags: Mapping[str, str] = FLAGS,
    embeddings: Mapping[str, str] = _EMBEDDINGS,
) -> str:
    """A library message with its keyword arguments written as the CLI's flags (or as
    another front end's: the pytest plugin passes its `--judge-*` options)."""
    text = _EMBEDDINGS_ARG.sub(
        lambda m: f"{embeddings[m.group('kw')]} {_value(m.group('value'))}", message
    )
    # embeddings=Embeddings(model='x') is one keyword and its call: the flag, once
    for flag in set(embeddings.values()):
        text = text.replace(f"embeddings={flag}", flag)
    text = _keyword_pattern(tuple(flags)).sub(lambda m: _keyword(m, flags), text)
    for python, cli in _PHRASES:
        text = text.replace(python, cli)
    return text
