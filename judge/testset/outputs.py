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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.ir.trec import write_qrels

if TYPE_CHECKING:
    from judge.testset.build import BuildResult


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def document_qrels(result: BuildResult) -> dict[str, dict[str, int]]:
    """Document-level judgments: a document's grade is its best chunk's."""
    doc_of = {c.chunk_id: c.doc_id for c in result.corpus.chunks}
    qrels: dict[str, dict[str, int]] = {}
    for item in result.items:
        if not item.answerable:
            continue
        docs = qrels.setdefault(item.id, {})
        for chunk, grade in item.relevance.items():
            doc = doc_of[chunk]
            docs[doc] = max(grade, docs.get(doc, 0))
    return qrels


def manifest(result: BuildResult) -> dict[str, Any]:
    """What was built from what, with what, at what cost."""
    reasons: dict[str, int] = {}
    for rejected in result.rejected:
        reasons[rejected.reason] = reasons.get(rejected.reason, 0) + 1
    thin: dict[str, int] = {}
    for chunk in result.corpus.chunks:
        if chunk.thin:
            thin[chunk.thin] = thin.get(chunk.thin, 0) + 1
    total = result.usage["total"]
    accepted = len(result.items)
    return {
        "corpus": {
            "source": result.corpus.source,
            "sha256": result.corpus.digest,
            "chunks": len(result.corpus.chunks),
            "documents": len({c.doc_id for c in result.corpus.chunks}),
            "split": result.corpus.split,
            "thin_chunks": dict(sorted(thin.items())),
        },
        "config": result.config,
        "counts": {
            "requested": result.requested,
            "accepted": result.accepted,
            "shortfall": result.shortfall,
            "rejected": len(result.rejected),
            "rejected_by_reason": dict(sorted(reasons.items())),
            "budget_reached": result.budget_reached,
        },
        "requests_per_accepted_question": total["requests"] / accepted if accepted else None,
        "usage": result.usage,
    }


def write_outputs(result: BuildResult, out: str | os.PathLike[str]) -> None:
    """Write the test set's files to the folder `out` (created if needed)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    _jsonl(folder / "testset.jsonl", [i.model_dump(mode="json") for i in result.items])
    _jsonl(folder / "rejected.jsonl", [r.model_dump(mode="json") for r in result.rejected])
    answerable = [i for i in result.items if i.answerable]
    write_qrels({i.id: i.relevance for i in answerable}, folder / "qrels.txt")
    write_qrels(document_qrels(result), folder / "qrels_docs.txt")
    named = {c for i in result.items for c in (*i.gold_chunk_ids, *i.relevance)}
    _jsonl(
        folder / "chunks.jsonl",
        [
            {
                "chunk_id": c.chunk_id,
                "doc_id": c.doc_id,
                "text": c.text,
                "start": c.start,
                "end": c.end,
            }
            for c in result.corpus.chunks
            if c.chunk_id in named
        ],
    )
    with (folder / "queries.tsv").open("w", encoding="utf-8") as out_file:
        for item in answerable:
            out_file.write(f"{item.id}\t{' '.join(item.question.split())}\n")
    (folder / "manifest.json").write_text(
        json.dumps(manifest(result), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
