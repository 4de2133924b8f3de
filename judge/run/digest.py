"""The hashes of a run's input: each row's (`row_hash`, which a checkpoint line records)
and the whole input's (`DataDigest`, summary.json's `data_sha256`), computed a row at a
time so the rows can be read as the run goes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from judge.errors import InputFormatError
from judge.json_values import sha256_hex
from judge.run.data import Row
from judge.samples import Message, Sample, prefix_chain


def row_hash(row: Row) -> str:
    """A fingerprint of a row's inputs. Extra columns may hold NaN, dates or other values
    JSON cannot encode exactly: they are hashed through their text, never rejected."""
    data = {
        "sample": _sample_fields(row.sample) if row.sample else None,
        "error": row.error,
        "retrieved_ids": row.retrieved_ids,
        "relevance": row.relevance,
    }
    return sha256_hex(_ROW_JSON.encode(data))


# json.dumps(data, sort_keys=True, ensure_ascii=False, default=repr), whose encoder
# json.dumps builds again on every call (every input row is hashed).
_ROW_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=repr)


def _sample_fields(sample: Sample) -> dict[str, Any]:
    """dataclasses.asdict(sample), without its deep copy when the fields hold plain text
    (extra columns may hold anything: they take the copy, which also turns dataclasses
    inside them into dicts). A sample that is no conversation's turn is hashed without the
    turn fields, so its hash is what it was before conversations existed; a turn's history
    is hashed through its digest (`history_digest`), computed once per conversation."""
    history = sample.history
    if history:
        sample = dataclasses.replace(sample, history=())
    if sample.extra:
        fields = dataclasses.asdict(sample)
        for column in TIMINGS.intersection(fields["extra"]):
            del fields["extra"][column]
    else:
        fields = {name: getattr(sample, name) for name in _SAMPLE_FIELDS}
    if not sample.in_conversation:
        for name in _TURN_FIELDS:
            del fields[name]
    else:
        fields["history"] = history_digest(history)
    return fields


# judge experiment's column of the app's latency in every app_outputs.jsonl row
# (judge.experiments.calls.LATENCY).
APP_LATENCY = "app_latency_s"
# Columns that are timings, not data: kept in the rows, left out of their hash, so the same
# data hashes alike however fast it was made.
TIMINGS = frozenset({APP_LATENCY})
_SAMPLE_FIELDS = tuple(f.name for f in dataclasses.fields(Sample))
_TURN_FIELDS = ("history", "turn", "conversation_id")


def history_digest(history: Sequence[Message]) -> str:
    """A digest of a turn's history: each message's fields chained, in order (the same for
    the same messages however they were read)."""
    return prefix_chain(history, _CHAIN, _ROOT, _link)[len(history)]


_CHAIN = "judge.run.digest.history_digest"  # the chain's name in a conversation's thread
_ROOT = sha256_hex("history")


def _link(previous: str, message: Message) -> str:
    data = [previous, message.role, message.content, message.turn, list(message.contexts)]
    return sha256_hex(_LINK_JSON.encode(data))


_LINK_JSON = json.JSONEncoder(ensure_ascii=False)  # json.dumps(data, ensure_ascii=False)


class DataDigest:
    """`data_sha256` computed on the way: the sha256 of every row's `row_hash`, in order, as
    `plan_run` computes it of loaded rows (`sha256_hex("".join(hashes))`), fed a row at a
    time so no hash is kept."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.rows = 0

    def add(self, row: Row, digest: str | None = None) -> str:
        """Count a row (the next in input order); returns its hash (`digest` if given)."""
        digest = row_hash(row) if digest is None else digest
        self._sha.update(digest.encode("ascii"))
        self.rows += 1
        return digest

    def hexdigest(self, rows: int) -> str:
        """The data hash, once all `rows` rows were added.

        Raises:
            judge.errors.InputFormatError: another number of rows was read (the input
                changed while it was read).
        """
        if self.rows != rows:
            raise InputFormatError(
                f"the input gave {self.rows} rows where it had {rows} when the run started: "
                "it changed while the run read it; run again on the input as it is now"
            )
        return self._sha.hexdigest()
