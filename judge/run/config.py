"""`RunConfig`: what a finished run records of itself, as summary.json's `config` holds it.

One typed value for every way a run is made (a plain run, a shard, a merge of shards,
`--processes`, Ray); `as_json()` is the JSON form, key for key and in the order
summary.json has always had. It reads as a mapping of that form too
(`result.config["resumed_rows"]`), so code written against the dict keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from judge.cache.identity import REPLAY_MISSES
from judge.run.shard import Shard


def run_notes(*parts: Iterable[str]) -> list[str]:
    """A run's `notes` from those of its parts, the same list however the run was made: in
    one process the plan's notes and the session's replay hints; joined from shards
    (`judge merge`, `--processes`), each shard's notes.

    Each note is listed once; the replay hints (one per model and server whose judgments
    the cache holds under other identities, beginning with REPLAY_MISSES) come after the
    other notes, sorted, as which shard or request missed first is not the run's to say.
    """
    seen = dict.fromkeys(note for notes in parts for note in notes)
    hints = sorted(note for note in seen if note.startswith(REPLAY_MISSES))
    return [note for note in seen if not note.startswith(REPLAY_MISSES)] + hints


@dataclass(frozen=True)
class RunConfig(Mapping[str, Any]):
    """A run's configuration and bookkeeping, as summary.json records it.

    Attributes:
        source: where the rows came from (a path, "list of 3 dicts", ...).
        columns: field -> the input column that held it.
        metrics: every metric's name, LLM-judged ones first.
        model: the judge model's name, or None (retrieval metrics alone).
        embeddings: the embedding model's name, or None.
        structured_output: the structured-output mode the session settled on.
        prompts: built-in prompt name -> version (its file's hash).
        prompt_set: the folder of prompt files that replaced built-in prompts
            (`judge eval --prompts`), or None.
        cache: the cache file (or Ray's cache directory), or None.
        cache_mode: "read-write", "replay", "record" or "off"; None without a cache.
        run: the run's fingerprint: metrics, models, servers and prompt versions.
        data_rows: the number of input rows.
        data_sha256: a hash of every row's inputs, in order.
        resumed_rows: rows taken from a checkpoint instead of judged again.
        seconds: the wall time of the judging (summed over shards when merged).
        notes: what the user should know (default metrics left out, replay hints).
        shard: the shard this run judged, or None for the whole input.
        ray: {"address", "actors"} of a run on Ray, or None.
        cache_damaged: damaged cache entries found (and not used) in this run.
        app: an experiment's app and its calls (`judge.experiments`), None for a file.
        lower_is_better: the run's metrics of its own (not built-in) where lower is
            better, which the gates read a plain threshold of as a cap.
    """

    source: str
    columns: dict[str, str]
    metrics: list[str]
    model: str | None
    embeddings: str | None
    structured_output: str | None
    prompts: dict[str, str]
    cache: str | None
    cache_mode: str | None
    run: str
    data_rows: int
    data_sha256: str
    resumed_rows: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    shard: Shard | None = None
    ray: dict[str, Any] | None = None
    cache_damaged: int = 0
    app: dict[str, Any] | None = None
    lower_is_better: list[str] = field(default_factory=list)
    prompt_set: str | None = None

    def as_json(self) -> dict[str, Any]:
        """summary.json's `config`: the keys of a plain run in their order; `ray` after
        `seconds` on Ray; `prompt_set` (after `prompts`), `shard` and `cache_damaged` only
        when there is one."""
        out: dict[str, Any] = {
            "source": self.source,
            "columns": dict(self.columns),
            "metrics": list(self.metrics),
            "model": self.model,
            "embeddings": self.embeddings,
            "structured_output": self.structured_output,
            "prompts": dict(self.prompts),
        }
        if self.prompt_set is not None:  # only then: an ordinary run's bytes stay as they were
            out["prompt_set"] = self.prompt_set
        out |= {
            "cache": self.cache,
            "cache_mode": self.cache_mode,
            "run": self.run,
            "data": {"rows": self.data_rows, "sha256": self.data_sha256},
            "resumed_rows": self.resumed_rows,
            "seconds": self.seconds,
        }
        if self.ray is not None:
            out["ray"] = dict(self.ray)
        out["notes"] = list(self.notes)
        if self.shard is not None:
            out["shard"] = self.shard.to_json()
        if self.cache_damaged:
            out["cache_damaged"] = self.cache_damaged
        if self.app is not None:
            out["app"] = dict(self.app)
        if self.lower_is_better:
            out["lower_is_better"] = list(self.lower_is_better)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunConfig:
        """The config a summary.json recorded (missing keys take their defaults)."""
        digest = data.get("data") or {}
        shard = data.get("shard")
        return cls(
            source=data.get("source", ""),
            columns=dict(data.get("columns") or {}),
            metrics=list(data.get("metrics") or []),
            model=data.get("model"),
            embeddings=data.get("embeddings"),
            structured_output=data.get("structured_output"),
            prompts=dict(data.get("prompts") or {}),
            cache=data.get("cache"),
            cache_mode=data.get("cache_mode"),
            run=data.get("run", ""),
            data_rows=int(digest.get("rows", 0)),
            data_sha256=digest.get("sha256", ""),
            resumed_rows=int(data.get("resumed_rows", 0)),
            seconds=float(data.get("seconds", 0.0)),
            notes=list(data.get("notes") or []),
            shard=Shard.from_json(shard) if shard else None,
            ray=dict(data["ray"]) if data.get("ray") is not None else None,
            cache_damaged=int(data.get("cache_damaged", 0)),
            app=dict(data["app"]) if data.get("app") is not None else None,
            lower_is_better=[str(m) for m in data.get("lower_is_better") or []],
            prompt_set=data.get("prompt_set"),
        )

    # The mapping of the JSON form, for readers written against summary.json's dict.
    def __getitem__(self, key: str) -> Any:
        return self.as_json()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_json())

    def __len__(self) -> int:
        return len(self.as_json())
