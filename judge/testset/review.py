"""Human review of a test set through a spreadsheet: export a CSV, edit it, import it.

One row per question (`kind` = question: action accept / edit / reject, the question and
reference answer, editable) and one per judged chunk (`kind` = chunk: its grade 0-2,
editable, with the chunk's text to read). Importing sets each question's status:
accept -> human_ok, edit (or a changed question, answer or grade) -> edited, reject ->
rejected; a blank action leaves it as it is. An item keeps its id through review (the
content hash it got when created), so importing the same file twice gives the same test
set, and a file whose ids do not match the set is refused before anything is written.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from judge.errors import InputFormatError
from judge.spreadsheet import cell_text, safe_cell
from judge.testset.export import load_chunks, load_items
from judge.testset.items import TestsetItem
from judge.testset.outputs import write_items

COLUMNS = (
    "kind",
    "question_id",
    "chunk_id",
    "action",
    "question",
    "reference",
    "grade",
    "status",
    "type",
    "text",
)
ACTIONS = {"": None, "accept": "human_ok", "edit": "edited", "reject": "rejected"}


class ReviewFileError(InputFormatError):
    """A reviewed file that does not fit the test set it is imported into."""


@dataclass
class ReviewSummary:
    """What an import changed: questions by new status, and chunk grades changed."""

    human_ok: int = 0
    edited: int = 0
    rejected: int = 0
    unchanged: int = 0
    grades_changed: int = 0


def export_review(folder: str | os.PathLike[str], path: str | os.PathLike[str]) -> int:
    """Write the review sheet of a test set folder; returns the number of questions.

    UTF-8 with a byte-order mark, so spreadsheet programs show Chinese text correctly; a
    text that a spreadsheet would take for a formula gets a quote in front
    (`judge.spreadsheet`), which importing the sheet removes.
    """
    items, chunks = load_items(folder), load_chunks(folder)
    with open(path, "w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        for item in items:
            quotes = " | ".join(e.quote for e in item.evidence)
            _write_row(
                writer,
                {
                    "kind": "question",
                    "question_id": item.id,
                    "question": item.question,
                    "reference": item.reference,
                    "status": item.review_status,
                    "type": item.type,
                    "text": f"evidence: {quotes}" if quotes else "",
                },
            )
            for chunk_id, grade in item.relevance.items():
                _write_row(
                    writer,
                    {
                        "kind": "chunk",
                        "question_id": item.id,
                        "chunk_id": chunk_id,
                        "grade": grade,
                        "text": chunks[chunk_id]["text"] if chunk_id in chunks else "",
                    },
                )
    return len(items)


def _write_row(writer: csv.DictWriter[str], row: dict[str, object]) -> None:
    """One row of the sheet, its text cells made safe to open in a spreadsheet."""
    writer.writerow({k: safe_cell(v) for k, v in row.items()})


def _rows(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = set(COLUMNS) - set(reader.fieldnames or ())
            if missing:
                raise ReviewFileError(
                    f"{path}: not a review sheet: columns {', '.join(sorted(missing))} are missing"
                )
            # Stripped first: the quote safe_cell added is in front of any leading space.
            return [
                {k: cell_text((v or "").strip()) for k, v in row.items() if k} for row in reader
            ]
    except OSError as exc:
        raise ReviewFileError(f"{path}: cannot be read ({exc.strerror})") from None


def _reviewed(
    item: TestsetItem, row: dict[str, str], grades: dict[str, int], line: int
) -> TestsetItem:
    action = row["action"].lower()
    if action not in ACTIONS:
        raise ReviewFileError(
            f"line {line}: action {row['action']!r}: write accept, edit, reject or leave it blank"
        )
    question, reference = row["question"] or item.question, row["reference"] or item.reference
    changed = (question, reference) != (item.question, item.reference) or grades != item.relevance
    status = ACTIONS[action] or ("edited" if changed else item.review_status)
    if status == "human_ok" and (changed or item.review_status == "edited"):
        status = "edited"  # accepted with edits, now or in an earlier import of the sheet
    return item.model_copy(
        update={
            "question": question,
            "reference": reference,
            "relevance": grades,
            "review_status": status,
        }
    )


def import_review(folder: str | os.PathLike[str], path: str | os.PathLike[str]) -> ReviewSummary:
    """Apply a reviewed sheet to the test set in folder (rewriting its testset.jsonl and TREC
    files); refuse, changing nothing, a sheet whose ids do not match the set."""
    items, chunks = load_items(folder), load_chunks(folder)
    by_id = {i.id: i for i in items}
    rows = _rows(path)
    questions: dict[str, tuple[int, dict[str, str]]] = {}
    grades: dict[str, dict[str, int]] = {i.id: dict(i.relevance) for i in items}
    graded: dict[tuple[str, str], int] = {}  # (question, chunk) -> the line grading it
    for line, row in enumerate(rows, start=2):
        qid = row["question_id"]
        if qid not in by_id:
            raise ReviewFileError(
                f"{path}:{line}: question id {qid!r} is not in {folder}; "
                "import the sheet exported from this test set"
            )
        if row["kind"] == "question":
            if qid in questions:
                raise ReviewFileError(f"{path}:{line}: question {qid} appears twice")
            questions[qid] = (line, row)
        elif row["kind"] == "chunk":
            chunk = row["chunk_id"]
            if chunk not in by_id[qid].relevance:
                raise ReviewFileError(f"{path}:{line}: chunk {chunk!r} was not judged for {qid}")
            if row["grade"] not in ("0", "1", "2"):
                raise ReviewFileError(f"{path}:{line}: grade {row['grade']!r}: write 0, 1 or 2")
            # Refused even with one grade: the later row's was kept, and an earlier one's
            # grade lost without a word; each chunk of a question is one row.
            earlier = graded.setdefault((qid, chunk), line)
            if earlier != line:
                raise ReviewFileError(
                    f"{path}:{line}: chunk {chunk!r} of question {qid!r} appears twice "
                    f"(lines {earlier} and {line}); keep one"
                )
            grades[qid][chunk] = int(row["grade"])
        else:
            raise ReviewFileError(f"{path}:{line}: kind {row['kind']!r}: question or chunk")
    absent = [i.id for i in items if i.id not in questions]
    if absent:
        raise ReviewFileError(
            f"{path}: {len(absent)} questions of {folder} have no row (first {absent[0]}); "
            "the sheet and the test set do not match"
        )
    summary = ReviewSummary()
    reviewed = []
    for item in items:
        line, row = questions[item.id]
        new = _reviewed(item, row, grades[item.id], line)
        summary.grades_changed += sum(new.relevance[c] != g for c, g in item.relevance.items())
        if new == item:
            summary.unchanged += 1
        else:
            setattr(summary, new.review_status, getattr(summary, new.review_status, 0) + 1)
        reviewed.append(new)
    write_items(reviewed, {c: row["doc_id"] for c, row in chunks.items()}, Path(folder))
    return summary
