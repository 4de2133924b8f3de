"""The corpus a test set is built from: the user's own chunks, or documents cut into chunks.

Chunks come from a `.jsonl`/`.json`/`.csv`/`.parquet` file or a saved dataset with
`chunk_id`, `doc_id` and `text` columns (mapped with `column_map`, as in `judge eval`).
Documents come from a folder of `.txt`/`.md` files, one `.txt`/`.md` file, or a file with
`doc_id` and `text` but no `chunk_id`; they are split (`judge.testset.split`) into chunks
whose ids are content hashes and whose spans point into the document. Every problem with
the input is an `InputFormatError` raised before any LLM call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from judge.errors import InputFormatError
from judge.fields import Field, FieldTable
from judge.ir.trec import trec_id_problem
from judge.json_values import canonical_json, sha256_hex
from judge.testset.split import DEFAULT_CHUNK_SIZE, split_document
from judge.testset.text import normalise
from judge.testset.thin import repeated_texts, thin_reason

FIELDS = FieldTable(
    (
        Field("chunk_id", ("chunk_id", "id", "_id", "passage_id")),
        Field("doc_id", ("doc_id", "document_id", "docid", "source")),
        Field(
            "text",
            ("text", "content", "contents", "chunk", "page_content", "passage"),
            required=True,
            hint="--column text=NAME",
        ),
    ),
    unknown_field="--column {field}=...: the corpus fields are {fields}",
    absent_column="no column {column!r} (columns: {columns})",
)
_DOCUMENT_SUFFIXES = (".txt", ".md", ".markdown")


@dataclass(frozen=True)
class Chunk:
    """One chunk: ids, text, span in its document (None for given chunks), why it is thin."""

    chunk_id: str
    doc_id: str
    text: str
    start: int | None = None
    end: int | None = None
    thin: str | None = None


@dataclass
class Corpus:
    """The chunks of a corpus, in input order, and where they came from."""

    chunks: list[Chunk]
    source: str
    split: bool = False
    by_id: dict[str, Chunk] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_id = {c.chunk_id: c for c in self.chunks}

    @property
    def seeds(self) -> list[Chunk]:
        """Chunks fit to ask about (not thin)."""
        return [c for c in self.chunks if c.thin is None]

    @property
    def digest(self) -> str:
        """sha256 of the chunk ids, document ids and texts, in order."""
        return sha256_hex(canonical_json([[c.chunk_id, c.doc_id, c.text] for c in self.chunks]))


def load_corpus(
    path: str | os.PathLike[str] | list[dict[str, Any]],
    *,
    column_map: Mapping[str, str] | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Corpus:
    """Read a corpus of chunks or documents (see the module docstring).

    Args:
        path: a folder of .txt/.md documents, one document file, a file of chunks or
            documents, or a list of dicts.
        column_map: field (chunk_id, doc_id, text) -> column name in the data.
        chunk_size: the largest chunk, in characters, when documents are split.
    """
    if isinstance(path, list):
        return _from_records(path, "list of dicts", column_map, chunk_size)
    p = Path(path)
    if p.is_dir() and not (p / "dataset_info.json").exists():
        files = sorted(
            f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in _DOCUMENT_SUFFIXES
        )
        if not files:
            raise InputFormatError(f"{p}: no .txt or .md documents in this folder")
        # Document ids are paths, with spaces escaped: TREC qrels ids are single words.
        docs = [
            (
                quote(f.relative_to(p).as_posix(), safe="/"),
                _read_text(f),
                f.suffix.lower() != ".txt",
            )
            for f in files
        ]
        return _split(docs, str(p), chunk_size)
    if p.suffix.lower() in _DOCUMENT_SUFFIXES:
        if not p.is_file():
            raise InputFormatError(f"{p}: no such file")
        return _split(
            [(quote(p.name), _read_text(p), p.suffix.lower() != ".txt")], str(p), chunk_size
        )
    from judge.run.data import read_records

    records, source = read_records(path)
    return _from_records(records, source, column_map, chunk_size)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(f"{path}: cannot be read as UTF-8 text ({exc})") from None


def _from_records(
    records: list[dict[str, Any]],
    source: str,
    column_map: Mapping[str, str] | None,
    chunk_size: int,
) -> Corpus:
    if not records:
        raise InputFormatError(f"{source}: the corpus is empty")
    present = list(dict.fromkeys(k for r in records for k in r))
    cols = FIELDS.resolve(present, column_map, source)
    rows = []
    for number, record in enumerate(records):
        text = record.get(cols["text"])
        if not isinstance(text, str) or not text.strip():
            raise InputFormatError(f"{source}: row {number} has no text in column {cols['text']!r}")
        doc = record.get(cols["doc_id"]) if "doc_id" in cols else None
        ident = record.get(cols["chunk_id"]) if "chunk_id" in cols else None
        rows.append(
            (
                None if ident is None else str(ident),
                f"row{number}" if doc is None or not str(doc).strip() else str(doc),
                text,
            )
        )
    if "chunk_id" not in cols:  # a file of documents
        return _split([(doc, text, False) for _, doc, text in rows], source, chunk_size)
    seen: dict[str, int] = {}
    for number, (ident, _, _) in enumerate(rows):
        if ident is None or not ident.strip():
            raise InputFormatError(f"{source}: row {number} has no chunk id")
        problem = trec_id_problem(ident) or trec_id_problem(rows[number][1])
        if problem is not None:
            raise InputFormatError(
                f"{source}: row {number}: chunk and document ids must not hold spaces or "
                "control characters (they are written to TREC qrels, whose ids are single "
                f"words); {ident!r} or {rows[number][1]!r} {problem}"
            )
        if ident in seen:
            raise InputFormatError(
                f"{source}: chunk id {ident!r} is used by rows {seen[ident]} and {number}; "
                "chunk ids must be unique (they become qrels ids)"
            )
        seen[ident] = number
    return _finish([Chunk(i or "", d, t) for i, d, t in rows], source, split=False)


def _split(docs: list[tuple[str, str, bool]], source: str, chunk_size: int) -> Corpus:
    """Chunks of the documents, ids `<sha256 of doc id and text, 16 hex>`, spans kept."""
    seen_docs: set[str] = set()
    chunks: list[Chunk] = []
    used: set[str] = set()
    for doc_id, text, markdown in docs:
        if doc_id in seen_docs:
            raise InputFormatError(f"{source}: document id {doc_id!r} appears twice")
        problem = trec_id_problem(doc_id)
        if problem is not None:
            raise InputFormatError(
                f"{source}: document id {doc_id!r} {problem}; TREC qrels ids are single words"
            )
        seen_docs.add(doc_id)
        for offset, piece in split_document(text, markdown=markdown, chunk_size=chunk_size):
            ident = sha256_hex(f"{doc_id}\0{piece}")[:16]
            repeat = 2
            while ident in used:  # the same text twice in one document
                ident = sha256_hex(f"{doc_id}\0{piece}\0{repeat}")[:16]
                repeat += 1
            used.add(ident)
            chunks.append(Chunk(ident, doc_id, piece, offset, offset + len(piece)))
    if not chunks:
        raise InputFormatError(f"{source}: the documents hold no text")
    return _finish(chunks, source, split=True)


def _finish(chunks: list[Chunk], source: str, *, split: bool) -> Corpus:
    """The corpus with thin chunks marked."""
    repeated = repeated_texts([c.text for c in chunks], [c.doc_id for c in chunks])
    marked = [
        replace(
            c,
            thin="repeated_in_many_documents"
            if normalise(c.text) in repeated
            else thin_reason(c.text),
        )
        for c in chunks
    ]
    return Corpus(marked, source, split=split)
