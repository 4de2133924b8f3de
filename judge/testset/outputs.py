"""The files of a built test set: testset.jsonl, qrels.txt, qrels_docs.txt, queries.tsv,
chunks.jsonl (the text of every chunk the items name, for review and export),
rejected.jsonl and manifest.json. testset.jsonl holds nothing that varies between runs
(no times, no usage), so a rerun with the same corpus, seed and cache is byte-identical.

The TREC files (qrels, queries) hold the answerable questions only: an unanswerable
question has no relevant chunk, so retrieval metrics cannot score it (its pooled grades
stay in testset.jsonl, under `relevance`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judge.ir.trec import write_qrels
from judge.testset.corpus import Corpus
from judge.testset.items import Rejected, TestsetItem


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """One JSON object per line, UTF-8 kept."""
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_chunks(corpus: Corpus, items: Sequence[TestsetItem], folder: Path) -> None:
    """Write chunks.jsonl: the chunks the items name (gold or judged), in corpus order."""
    named = {c for i in items for c in (*i.gold_chunk_ids, *i.relevance)}
    fields = ("chunk_id", "doc_id", "text", "start", "end")
    rows = [{f: getattr(c, f) for f in fields} for c in corpus.chunks if c.chunk_id in named]
    write_jsonl(folder / "chunks.jsonl", rows)


def scored(items: Sequence[TestsetItem]) -> list[TestsetItem]:
    """The items retrieval metrics can score: answerable and not rejected in review."""
    return [i for i in items if i.answerable and i.review_status != "rejected"]


def document_qrels(
    items: Sequence[TestsetItem], doc_of: Mapping[str, str]
) -> dict[str, dict[str, int]]:
    """Document-level judgments of the scored items: a document's grade is its best chunk's."""
    qrels: dict[str, dict[str, int]] = {}
    for item in scored(items):
        docs = qrels.setdefault(item.id, {})
        for chunk, grade in item.relevance.items():
            doc = doc_of[chunk]
            docs[doc] = max(grade, docs.get(doc, 0))
    return qrels


def write_items(items: Sequence[TestsetItem], doc_of: Mapping[str, str], folder: Path) -> None:
    """Write testset.jsonl and the TREC files (qrels.txt, qrels_docs.txt, queries.tsv)."""
    write_jsonl(folder / "testset.jsonl", [i.model_dump(mode="json") for i in items])
    write_qrels({i.id: i.relevance for i in scored(items)}, folder / "qrels.txt")
    write_qrels(document_qrels(items, doc_of), folder / "qrels_docs.txt")
    with (folder / "queries.tsv").open("w", encoding="utf-8") as out:
        for item in scored(items):
            out.write(f"{item.id}\t{' '.join(item.question.split())}\n")


def write_set(
    out: str | os.PathLike[str],
    items: Sequence[TestsetItem],
    rejected: Sequence[Rejected],
    corpus: Corpus,
    manifest: Mapping[str, Any],
) -> None:
    """Write a test set's files (built or mined) to the folder `out`, created if needed."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_items(items, {c.chunk_id: c.doc_id for c in corpus.chunks}, folder)
    write_jsonl(folder / "rejected.jsonl", [r.model_dump(mode="json") for r in rejected])
    write_chunks(corpus, items, folder)
    (folder / "manifest.json").write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
