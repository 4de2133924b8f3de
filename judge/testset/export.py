"""Reading a built test set back, and exporting it for `judge eval`, RAGAS or TREC tools.

Formats:
- `jsonl`: judge eval's columns: id, question, ground_truth, reference_contexts,
  reference_context_ids, relevance (chunk id -> grade), type, answerable;
- `ragas`: RAGAS's testset columns: user_input, reference, reference_contexts,
  synthesizer_name (the question type), plus reference_context_ids;
- `qrels`: TREC qrels (answerable questions, chunk level; `doc` level with documents).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge.errors import InputFormatError
from judge.ir.trec import write_qrels
from judge.run.data import loads_json, text_lines
from judge.testset.items import TestsetItem
from judge.testset.outputs import document_qrels, scored

FORMATS = ("jsonl", "ragas", "qrels")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise InputFormatError(
            f"{path}: no such file; is {path.parent} a folder written by `judge testset build`?"
        )
    rows = []
    for number, line in text_lines(path.read_text(encoding="utf-8")):
        if line.strip():
            try:
                rows.append(loads_json(line))
            except json.JSONDecodeError as exc:
                raise InputFormatError(f"not JSON ({exc})", path=str(path), line=number) from None
    return rows


def load_items(folder: str | os.PathLike[str]) -> list[TestsetItem]:
    """The items of a test set folder's testset.jsonl, validated."""
    path = Path(folder) / "testset.jsonl"
    items = []
    for number, row in enumerate(_read_jsonl(path), start=1):
        try:
            items.append(TestsetItem.model_validate(row))
        except ValueError as exc:
            raise InputFormatError(
                f"not a test set item: {exc}", path=str(path), line=number
            ) from None
    return items


def load_chunks(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """chunk id -> {chunk_id, doc_id, text, start, end} from the folder's chunks.jsonl."""
    return {row["chunk_id"]: row for row in _read_jsonl(Path(folder) / "chunks.jsonl")}


def _texts(item: TestsetItem, chunks: dict[str, dict[str, Any]]) -> list[str]:
    return [chunks[c]["text"] for c in item.gold_chunk_ids if c in chunks]


def _jsonl_row(item: TestsetItem, chunks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": item.id,
        "question": item.question,
        "ground_truth": item.reference,
        "reference_contexts": _texts(item, chunks),
        "reference_context_ids": item.gold_chunk_ids,
        "relevance": item.relevance if item.answerable else {},
        "type": item.type,
        "answerable": item.answerable,
    }


def _ragas_row(item: TestsetItem, chunks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "user_input": item.question,
        "reference": item.reference,
        "reference_contexts": _texts(item, chunks),
        "reference_context_ids": item.gold_chunk_ids,
        "synthesizer_name": item.type,
    }


ROWS: dict[str, Callable[[TestsetItem, dict[str, dict[str, Any]]], dict[str, Any]]] = {
    "jsonl": _jsonl_row,
    "ragas": _ragas_row,
}


def export(
    folder: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str], *, level: str = "chunk"
) -> int:
    """Write the test set in folder to `out` in a format (see the module docstring); returns
    the number of questions written."""
    if fmt not in FORMATS:
        raise InputFormatError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    items = [i for i in load_items(folder) if i.review_status != "rejected"]
    chunks = load_chunks(folder)
    if fmt == "qrels":
        if level == "doc":
            qrels = document_qrels(items, {c: row["doc_id"] for c, row in chunks.items()})
        else:
            qrels = {i.id: dict(i.relevance) for i in scored(items)}
        write_qrels(qrels, out)
        return len(qrels)
    with open(out, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(ROWS[fmt](item, chunks), ensure_ascii=False) + "\n")
    return len(items)
