"""judge testset review: the CSV round trip (accept, edit, reject, grades), idempotent
re-import, and refusal of a sheet whose ids do not match."""

from __future__ import annotations

import csv
import json

import pytest

from judge.cli.main import main
from judge.testing import FakeLLMServer
from judge.testset.review import ReviewFileError, import_review
from tests.helpers.testset import Script, cli_args, write_corpus


@pytest.fixture
def built(tmp_path):
    out = tmp_path / "set"
    corpus = write_corpus(tmp_path / "docs")
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, out, "-n", "5", "--seed", "4")) == 0
    return out


def _sheet(path):
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def _write(path, rows):
    with open(path, "w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _items(folder):
    return [json.loads(x) for x in (folder / "testset.jsonl").read_text("utf-8").splitlines()]


def test_review_round_trip_sets_statuses_and_rewrites_qrels(built, tmp_path, capsys):
    sheet = tmp_path / "review.csv"
    assert main(["testset", "review", str(built), "--export", str(sheet)]) == 0
    rows = _sheet(sheet)
    items = _items(built)
    questions = [r for r in rows if r["kind"] == "question"]
    assert [r["question_id"] for r in questions] == [i["id"] for i in items]
    assert len(rows) - len(questions) == sum(len(i["relevance"]) for i in items)
    answerable = [i["id"] for i in items if i["answerable"]]
    accept, edit, reject = answerable[:3]
    for row in rows:
        if row["kind"] == "question" and row["question_id"] == accept:
            row["action"] = "accept"
        if row["kind"] == "question" and row["question_id"] == edit:
            row["question"] = "An edited question?"
        if row["kind"] == "question" and row["question_id"] == reject:
            row["action"] = "reject"
    regraded = next(r for r in rows if r["kind"] == "chunk" and r["question_id"] == accept)
    regraded["grade"] = "1" if regraded["grade"] == "2" else "2"
    reviewed = tmp_path / "reviewed.csv"
    _write(reviewed, rows)
    before_ids = [i["id"] for i in items]
    assert main(["testset", "review", str(built), "--import", str(reviewed)]) == 0
    assert "0 accepted, 2 edited, 1 rejected" in capsys.readouterr().out  # regrade = edit
    after = {i["id"]: i for i in _items(built)}
    assert list(after) == before_ids  # ids survive review
    assert after[accept]["review_status"] == "edited"
    assert after[accept]["relevance"][regraded["chunk_id"]] == int(regraded["grade"])
    assert (
        after[edit]["question"] == "An edited question?"
        and after[edit]["review_status"] == "edited"
    )
    assert after[reject]["review_status"] == "rejected"
    qrels = (built / "qrels.txt").read_text("utf-8")
    queries = (built / "queries.tsv").read_text("utf-8")
    assert (
        reject not in qrels and reject not in queries and f"{edit}\tAn edited question?" in queries
    )
    # The same sheet again changes nothing.
    snapshot = (built / "testset.jsonl").read_bytes()
    summary = import_review(built, reviewed)
    assert (built / "testset.jsonl").read_bytes() == snapshot
    assert summary.unchanged == len(items) and summary.grades_changed == 0


def test_accept_alone_gives_human_ok(built, tmp_path):
    sheet = tmp_path / "review.csv"
    main(["testset", "review", str(built), "--export", str(sheet)])
    rows = _sheet(sheet)
    for row in rows:
        if row["kind"] == "question":
            row["action"] = "accept"
    _write(sheet, rows)
    summary = import_review(built, sheet)
    assert summary.human_ok == len(_items(built))
    assert {i["review_status"] for i in _items(built)} == {"human_ok"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda rows: rows[0].update(question_id="qdeadbeefdeadbeef"), "is not in"),
        (lambda rows: rows.remove(rows[0]), "have no row"),
        (
            lambda rows: next(r for r in rows if r["kind"] == "chunk").update(grade="3"),
            "write 0, 1 or 2",
        ),
        (
            lambda rows: next(r for r in rows if r["kind"] == "chunk").update(chunk_id="zz"),
            "was not judged",
        ),
        (lambda rows: rows[0].update(action="maybe"), "accept, edit, reject"),
        (lambda rows: rows.append(dict(rows[0])), "appears twice"),
    ],
)
def test_a_sheet_that_does_not_match_is_refused_and_nothing_written(
    built, tmp_path, change, message
):
    sheet = tmp_path / "review.csv"
    main(["testset", "review", str(built), "--export", str(sheet)])
    rows = _sheet(sheet)
    change(rows)
    _write(sheet, rows)
    snapshot = (built / "testset.jsonl").read_bytes()
    with pytest.raises(ReviewFileError, match=message):
        import_review(built, sheet)
    assert (built / "testset.jsonl").read_bytes() == snapshot


@pytest.mark.parametrize("same_grade", [False, True])
def test_a_chunk_row_given_twice_is_refused_naming_both_lines(built, tmp_path, capsys, same_grade):
    """The last of two rows of one (question, chunk) was kept: a reviewer's grade on the
    first was lost without a word. Refused even when the grades agree: each chunk of a
    question is one row, as each question is."""
    sheet = tmp_path / "review.csv"
    main(["testset", "review", str(built), "--export", str(sheet)])
    rows = _sheet(sheet)
    at = next(i for i, r in enumerate(rows) if r["kind"] == "chunk")
    first = rows[at]
    again = {**first, "grade": first["grade"] if same_grade else str((int(first["grade"]) + 1) % 3)}
    rows.insert(at + 1, again)
    _write(sheet, rows)
    snapshot = (built / "testset.jsonl").read_bytes()
    assert main(["testset", "review", str(built), "--import", str(sheet)]) == 2
    line = at + 2  # the header is line 1
    assert (
        f"{sheet}:{line + 1}: chunk {first['chunk_id']!r} of question "
        f"{first['question_id']!r} appears twice (lines {line} and {line + 1}); keep one"
    ) in capsys.readouterr().err
    assert (built / "testset.jsonl").read_bytes() == snapshot


def test_a_file_that_is_not_a_review_sheet_exits_2(built, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", "utf-8")
    assert main(["testset", "review", str(built), "--import", str(bad)]) == 2
    assert "not a review sheet" in capsys.readouterr().err


# Texts a spreadsheet would take for formulas (OWASP's CSV injection list), and one that
# starts with the quote the neutralising adds.
FORMULAS = ['=HYPERLINK("http://x","click")', "+1+2", "-3 degrees", "@SUM(A1)", "\tx", "\rx"]


def test_formulas_are_neutralised_in_the_sheet_and_restored_on_import(built, tmp_path):
    lines = (built / "testset.jsonl").read_text("utf-8").splitlines(keepends=True)
    texts = [*FORMULAS, "'quoted already"]
    edited = []
    for number, line in enumerate(lines):
        item = json.loads(line)
        item["question"] = texts[number % len(texts)] + " why?"
        item["reference"] = texts[(number + 1) % len(texts)]
        edited.append(json.dumps(item, ensure_ascii=False) + "\n")
    (built / "testset.jsonl").write_text("".join(edited), "utf-8")
    chunks = [json.loads(x) for x in (built / "chunks.jsonl").read_text("utf-8").splitlines()]
    for number, chunk in enumerate(chunks):
        chunk["text"] = texts[number % len(texts)]
    (built / "chunks.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in chunks), "utf-8"
    )
    before = _items(built)
    sheet = tmp_path / "review.csv"
    assert main(["testset", "review", str(built), "--export", str(sheet)]) == 0
    rows = _sheet(sheet)
    cells = [v for row in rows for v in row.values() if v]
    assert not [c for c in cells if c[0] in "=+-@\t\r"]  # no cell a spreadsheet evaluates
    questions = [r for r in rows if r["kind"] == "question"]
    assert [r["question"] for r in questions] == ["'" + i["question"] for i in before]
    assert all(r["grade"] in ("0", "1", "2") for r in rows if r["kind"] == "chunk")
    summary = import_review(built, sheet)  # the sheet as exported: nothing changes
    assert summary.unchanged == len(before) and summary.grades_changed == 0
    assert _items(built) == before
    for row in questions:
        if row["question"] == "'@SUM(A1) why?":
            row["question"] = "'=A1 edited?"  # typed by a reviewer, quote and all
    _write(sheet, rows)
    import_review(built, sheet)
    assert "=A1 edited?" in [i["question"] for i in _items(built)]
