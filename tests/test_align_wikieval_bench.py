"""bench/quality/align_wikieval.py against the loopback fake judge, on WikiEval-shaped rows
written here (the real file is never read by the tests)."""

from __future__ import annotations

import json

from bench.quality.align_wikieval import labelled_rows, main


def item(i: int) -> dict:
    return {
        "id": f"wikieval-{i:02d}",
        "question": f"Question: What happened to item {i}?",
        "question_stripped": f"What happened to item {i}?",
        "answer": f"Answer: Item {i} was launched in 2023.",
        "answer_stripped": f"Item {i} was launched in 2023.",
        "ungrounded_answer": f"Item {i} was cancelled in 1999.",
        "poor_answer": "Something happened.",
        "context_v1": [f"Item {i} was launched in 2023."],
        "context_v2": [f"Item {i} was launched in 2023.", "Unrelated text."],
    }


def test_rows_are_labelled_pairs_without_the_leaking_prefixes():
    rows = labelled_rows([item(0)])
    assert [(r["answer"], r["label"]) for r in rows] == [
        ("Item 0 was launched in 2023.", 1),
        ("Item 0 was cancelled in 1999.", 0),
    ]
    assert all(not r["question"].startswith("Question:") for r in rows)
    assert {r["item"] for r in rows} == {"wikieval-00"}


def test_the_script_runs_against_the_fake_judge(tmp_path, capsys):
    data = tmp_path / "wikieval.jsonl"
    data.write_text("".join(json.dumps(item(i)) + "\n" for i in range(12)), encoding="utf-8")
    out = tmp_path / "summary.json"
    code = main(
        [str(data), "--fake", "--limit", "10", "--work", str(tmp_path / "w"), "--json", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "held-out rows" in printed and "built-in" in printed
    summary = json.loads(out.read_text())
    assert summary["questions"] == 10 and summary["held_out_rows"] == 6  # 3 questions, 2 rows each
    assert summary["fake_server_requests"] > 0
    built_in = summary["candidates"]["built-in"]
    # The heuristic judge finds every ungrounded answer unsupported: it agrees with people.
    assert built_in["balanced_accuracy@0.5"][0] == 1.0
    assert (tmp_path / "w" / "fake" / "prompts" / "verify.txt").is_file()
