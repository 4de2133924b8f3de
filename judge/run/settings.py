"""The judge's settings, one resolver for the command line and the pytest plugin.

Each setting is found, first found wins, in: the flags (`--model`, `--judge-model`), the
environment (`JUDGE_MODEL`), pytest's ini options (`judge_model`, the plugin only), the
`[tool.judge]` table of the project's pyproject.toml (`model`), then the defaults of the
dataclasses that take it (`judge.LLM`, `judge.Embeddings`). Relative paths of a file are
relative to that file's folder.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.errors import JudgeError
from judge.llm.config import LLM, Embeddings

DEFAULT_CACHE = Path(".judge") / "cache.sqlite"
ENV_PREFIX = "JUDGE_"
TOOL_TABLE = "[tool.judge]"


def _default(cls: type, name: str) -> Any:
    """The default of a dataclass field (`LLM.timeout`'s 120.0): restated nowhere else."""
    return {f.name: f.default for f in dataclasses.fields(cls)}[name]


@dataclass(frozen=True)
class Setting:
    """One setting: its name (the keyword; `--NAME` and `[tool.judge] NAME` with dashes,
    `JUDGE_NAME` in the environment), its type and its default."""

    name: str
    kind: type
    default: Any
    path: bool = False  # a file's path: a relative one is relative to where it was given
    server: bool = False  # where requests (and the API key) go: see `resolve_settings`
    minimum: float | None = None  # the smallest value taken (a number's)
    above: bool = False  # the minimum itself is not taken (a timeout of 0 seconds)

    @property
    def env(self) -> str:
        """Its environment variable."""
        return ENV_PREFIX + self.name.upper()

    @property
    def key(self) -> str:
        """Its key in `[tool.judge]`."""
        return self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("model", str, None),
    Setting("api_base", str, None, server=True),
    Setting("embedding_model", str, None),
    Setting("embedding_api_base", str, None, server=True),
    Setting("cache", str, str(DEFAULT_CACHE), path=True),
    Setting("cache_as", str, None),
    Setting("concurrency", int, _default(LLM, "max_concurrency"), minimum=1),
    Setting("timeout", float, _default(LLM, "timeout"), minimum=0, above=True),
    Setting("max_retries", int, _default(LLM, "max_retries"), minimum=0),
    Setting("context_window", int, None, minimum=1),
)
BY_NAME = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Settings:
    """The judge's settings, resolved (`resolve_settings`).

    Attributes:
        model: the judge model, None when none is set anywhere.
        api_base: its server.
        embedding_model: the embedding model, for answer_relevancy.
        embedding_api_base: the embedding server (default `api_base`).
        cache: the judgment cache file.
        cache_as: the server identity in cache keys.
        concurrency: requests in flight at once (`LLM.max_concurrency`).
        timeout: seconds per request.
        max_retries: retries of a failed request.
        context_window: the judge model's input limit in tokens, None to look it up.
        origin: setting -> where its value came from ("flag", "environment",
            "ini", "pyproject", "default").
    """

    model: str | None = None
    api_base: str | None = None
    embedding_model: str | None = None
    embedding_api_base: str | None = None
    cache: str = str(DEFAULT_CACHE)
    cache_as: str | None = None
    concurrency: int = _default(LLM, "max_concurrency")
    timeout: float = _default(LLM, "timeout")
    max_retries: int = _default(LLM, "max_retries")
    context_window: int | None = None
    origin: Mapping[str, str] = field(default_factory=dict, compare=False)

    def llm(self, api_key: str | None = None) -> LLM | None:
        """The judge model these settings name (None without a model)."""
        if self.model is None:
            return None
        return LLM(
            model=self.model,
            api_base=self.api_base,
            api_key=api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            max_concurrency=max(1, self.concurrency),
            context_window=self.context_window,
            cache_as=self.cache_as,
        )

    def embeddings(self, api_key: str | None = None) -> Embeddings | None:
        """The embedding model these settings name (None without one)."""
        if self.embedding_model is None:
            return None
        return Embeddings(
            model=self.embedding_model,
            api_base=self.embedding_api_base or self.api_base,
            api_key=api_key,
            cache_as=self.cache_as,
        )


def _converted(setting: Setting, value: Any, where: str) -> Any:
    """A value of a file or the environment as the setting's type; `where` names it."""
    if setting.kind is str:
        if not isinstance(value, str) or not value.strip():
            raise JudgeError(f"{where} must be a non-empty string, not {value!r}")
        return value
    if isinstance(value, bool):  # True is an int to Python, never a number of requests
        raise JudgeError(f"{where} must be a number, not {value!r}")
    try:
        number = setting.kind(value)
    except (TypeError, ValueError):
        what = "a whole number" if setting.kind is int else "a number"
        raise JudgeError(f"{where} must be {what}, not {value!r}") from None
    if setting.kind is int and isinstance(value, float) and value != number:
        raise JudgeError(f"{where} must be a whole number, not {value!r}")
    _check_range(setting, number, value, where)
    return number


def _check_range(setting: Setting, number: Any, given: Any, where: str) -> None:
    """Refuse a number below the setting's minimum (or not finite), naming where it was
    given: JUDGE_CONCURRENCY=0 is not one request at a time, nor JUDGE_TIMEOUT=nan none."""
    low = setting.minimum
    if low is None or not isinstance(number, (int, float)) or isinstance(number, bool):
        return
    if setting.above:
        if not (math.isfinite(number) and number > low):
            raise JudgeError(f"{where} must be a finite number above {low:g}, not {given!r}")
    elif not number >= low:
        raise JudgeError(f"{where} must be at least {low:g}, not {given!r}")


def resolve_settings(
    flags: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    ini: Mapping[str, Any] | None = None,
    pyproject: Path | None = Path("pyproject.toml"),
    file_servers: bool = True,
    flag_prefix: str = "--",
) -> Settings:
    """The settings, each from the first place that gives it: `flags` (a value of None
    is not given), the environment (`JUDGE_MODEL`, ...), `ini` (pytest's ini options),
    `[tool.judge]` of `pyproject`, then the defaults (`judge.LLM`'s).

    Args:
        flags: setting -> the value given on the command line, or None.
        environ: the environment (default `os.environ`); an empty variable is not given.
        ini: setting -> a value of pytest's ini options (relative paths relative to the
            pyproject's folder).
        pyproject: the project's pyproject.toml (None or a missing file: none); its
            relative paths, and the default cache, are relative to its folder.
        file_servers: whether the files may name the servers (`api-base`,
            `embedding-api-base`): the command line run in a folder it was given does
            not send the user's API key where a file of that folder says.
        flag_prefix: how the caller's flags start, for errors (`--judge-` under pytest).

    Raises:
        judge.errors.JudgeError: a value of the environment or a file is not of its
            setting's type, or `[tool.judge]` holds an `api-key`.
    """
    from judge.metrics.custom import project_table

    env = os.environ if environ is None else environ
    root = pyproject.parent if pyproject is not None else Path()
    table = project_table(pyproject) if pyproject is not None else {}
    if "api-key" in table:
        raise JudgeError(
            f"{pyproject}: {TOOL_TABLE} api-key: a key does not belong in a file kept with "
            f"the code; set {ENV_PREFIX}API_KEY or the provider's variable instead"
        )
    _check_keys(table, pyproject)
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for s in SETTINGS:
        layers: list[tuple[str, Any, str]] = [
            ("flag", flags.get(s.name), ""),
            ("environment", env.get(s.env) or None, f"{s.env}"),
        ]
        if ini is not None:
            layers.append(("ini", ini.get(s.name) or None, f"judge_{s.name}"))
        if file_servers or not s.server:
            layers.append(("pyproject", table.get(s.key), f"{pyproject} {TOOL_TABLE} {s.key}"))
        for name, value, where in layers:
            if value is None:
                continue
            if name == "flag":
                _check_range(s, value, value, f"{flag_prefix}{s.key}")
            else:
                value = _converted(s, value, where)
                if s.path and name in ("ini", "pyproject"):
                    value = str(root / value)
            values[s.name], origin[s.name] = value, name
            break
        else:
            default = s.default
            if s.path and default is not None and pyproject is not None:
                default = str(root / default)
            values[s.name], origin[s.name] = default, "default"
    return Settings(**values, origin=origin)


# The keys of [tool.judge] read elsewhere: the modules of the project's own metrics.
OTHER_KEYS = ("metrics-modules",)


def _check_keys(table: Mapping[str, Any], pyproject: Path | None) -> None:
    """Refuse a key of [tool.judge] that no setting has: a misspelt key (or `max_retries`
    for `max-retries`) would leave the default the user meant to change."""
    import difflib

    known = [s.key for s in SETTINGS] + list(OTHER_KEYS)
    for key in table:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key).replace("_", "-"), known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise JudgeError(
            f"{pyproject}: {TOOL_TABLE} {key}: no such setting{hint}; the keys are "
            f"{', '.join(known)}"
        )


def ignored_servers(pyproject: Path | None, settings: Settings) -> list[str]:
    """The server keys of `[tool.judge]` that `file_servers=False` left unused (a setting
    not given elsewhere), so the command can say so."""
    from judge.metrics.custom import project_table

    if pyproject is None:
        return []
    table = project_table(pyproject)
    return [
        s.key
        for s in SETTINGS
        if s.server and s.key in table and settings.origin.get(s.name) == "default"
    ]


__all__ = [
    "DEFAULT_CACHE",
    "SETTINGS",
    "Setting",
    "Settings",
    "ignored_servers",
    "resolve_settings",
]
