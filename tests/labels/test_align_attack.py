"""Attacks on `judge align` and prompt sets (issue 42): duplicate rows across the split,
splits without a label, candidates whose folders collide, a set file edited in place."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from judge.errors import JudgeError
from judge.labels.align import align, split_rows
from judge.metrics.prompts import load_prompt_set, prompts_dir
from judge.testing import FakeLLMServer
from tests.helpers.align import (
    duplicated,
    example_markers,
    fake_judge,
    labelled,
    markers,
    shown_a_person,
)


def test_an_edited_prompt_set_file_gets_a_new_version_even_with_the_same_stat(tmp_path):
    """A set file rewritten with text of the same size within one tick of the file clock
    (coarse on Linux: a few ms) must not keep the old version: its cache keys would serve
    the old set's judgments."""
    folder = tmp_path / "set"
    folder.mkdir()
    text = (prompts_dir() / "verify.txt").read_text(encoding="utf-8")
    file = folder / "verify.txt"
    file.write_text(text + "\nStrict A.\n", encoding="utf-8")
    os.utime(file, ns=(1_000_000_000, 1_000_000_000))
    first = load_prompt_set(folder)["verify"].version
    file.write_text(text + "\nStrict B.\n", encoding="utf-8")
    os.utime(file, ns=(1_000_000_000, 1_000_000_000))
    assert load_prompt_set(folder)["verify"].version != first


def test_a_held_out_row_that_repeats_a_tune_row_is_never_shown_as_an_example(tmp_path):
    rows = duplicated(30)
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        result = align(
            rows,
            metric="faithfulness",
            label="human",
            llm=llm,
            out=tmp_path / "aligned",
            progress=False,
        )
        shown = example_markers(server)
    held = set().union(*(markers(rows[i]["answer"]) for i in result.split.held_out))
    assert shown
    assert not shown & held  # a held-out row's text reached a prompt as an example


def test_one_group_is_refused_not_measured_on_no_rows(tmp_path):
    rows = [{**r, "question_id": "same"} for r in labelled(10)]
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        with pytest.raises(JudgeError, match="split has no row labelled"):
            align(
                rows,
                metric="faithfulness",
                label="human",
                llm=llm,
                out=tmp_path / "aligned",
                group="question_id",
                progress=False,
            )
        assert server.requests == []


def test_groups_that_leave_a_split_without_a_label_are_refused(tmp_path):
    # Every unfaithful row shares a group with a faithful one: one mixed group of the 0s
    # and some all-1 groups; the held-out split can hold no 0 at all.
    rows = labelled(12)
    for i, row in enumerate(rows):
        row["question_id"] = "mixed" if row["human"] == 0 or i == 0 else f"g{i}"
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        with pytest.raises(JudgeError, match="held-out split has no row labelled 0"):
            align(
                rows,
                metric="faithfulness",
                label="human",
                llm=llm,
                out=tmp_path / "aligned",
                group="question_id",
                progress=False,
            )
        assert server.requests == []


def test_candidates_of_one_name_are_each_measured_and_published_as_measured(tmp_path):
    text = (prompts_dir() / "verify.txt").read_text(encoding="utf-8")
    for name, extra in (("a", "First variant."), ("b", "Second variant, longer text.")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "verify.txt").write_text(f"{text}\n{extra}\n", encoding="utf-8")
    # A folder named like an examples candidate must not merge into that one's folder.
    (tmp_path / "c" / "examples-2").mkdir(parents=True)
    (tmp_path / "c" / "examples-2" / "verify.txt").write_text(f"{text}\nThird.\n", "utf-8")
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        result = align(
            labelled(20),
            metric="faithfulness",
            label="human",
            llm=llm,
            out=tmp_path / "aligned",
            examples=[2],
            candidates=[
                str(tmp_path / "a" / "verify.txt"),
                str(tmp_path / "b" / "verify.txt"),
                str(tmp_path / "c" / "examples-2"),
            ],
            progress=False,
        )
    folders = [c.folder for c in result.candidates if c.folder is not None]
    assert len(folders) == len(set(folders)) == 4
    for c in result.candidates:
        if c.folder is not None:
            on_disk = load_prompt_set(Path(c.folder))["verify"].version
            assert on_disk == c.prompts["verify"], c.name


def test_a_candidate_from_the_output_folder_is_not_emptied_before_it_is_read(tmp_path):
    text = (prompts_dir() / "verify.txt").read_text(encoding="utf-8")
    source = tmp_path / "aligned" / "candidates" / "mine"
    source.mkdir(parents=True)
    (source / "verify.txt").write_text(f"{text}\nMine.\n", encoding="utf-8")
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        result = align(
            labelled(12),
            metric="faithfulness",
            label="human",
            llm=llm,
            out=tmp_path / "aligned",
            examples=[2],
            candidates=[str(source)],
            progress=False,
        )
    assert (source / "verify.txt").read_text(encoding="utf-8").endswith("Mine.\n")
    assert result.candidates[-1].prompts["verify"] == load_prompt_set(source)["verify"].version


def test_groups_of_different_sizes_are_one_stratum():
    """Groups holding only 1s (or only 0s) are one stratum whatever their sizes: counted
    by size, each group of a new size was a stratum of one, never held out."""
    sizes = [1, 2, 3, 4, 5, 6]  # one group of each size, all 1s; then the same of 0s
    labels, groups = [], []
    for value in (1.0, 0.0):
        for size in sizes:
            labels += [value] * size
            groups += [f"{value}-{size}"] * size
    split = split_rows(np.array(labels), 0.3, seed=0, groups=groups)
    held = {groups[i] for i in split.held_out}
    assert len(held) == 4  # round(0.3 * 6) groups of each label


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"<<<system>>>\nx\n<<<user>>>\n{{claims}}\n", "must use exactly the variables"),
        (b"<<<system>>>\n\xff\xfe\n<<<user>>>\n{{claims}} {{contexts}}\n", "cannot read it"),
    ],
)
def test_a_candidate_file_that_cannot_be_used_fails_before_any_request(tmp_path, content, says):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "verify.txt").write_bytes(content)
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        with pytest.raises(JudgeError, match=says):
            align(
                labelled(12),
                metric="faithfulness",
                label="human",
                llm=llm,
                out=tmp_path / "aligned",
                candidates=[str(tmp_path / "mine" / "verify.txt")],
                progress=False,
            )
        assert server.requests == []


def test_repeated_rows_are_found_under_their_columns_own_names(tmp_path):
    """Rows whose answer and contexts sit in other columns (response, retrieved_contexts,
    as the run reads them) are kept together by those, and distinct rows are not all made
    one unit because the columns named answer and contexts are absent."""
    rows = [
        {
            "id": r["id"],
            "question": r["question"],
            "response": r["answer"],
            "retrieved_contexts": r["contexts"],
            "human": r["human"],
        }
        for r in duplicated(20)
    ]
    with FakeLLMServer(chat=shown_a_person) as server:
        llm = fake_judge(server)
        result = align(
            rows,
            metric="faithfulness",
            label="human",
            llm=llm,
            out=tmp_path / "aligned",
            examples=[2],
            progress=False,
        )
        shown = example_markers(server)
    held = set().union(*(markers(rows[i]["response"]) for i in result.split.held_out))
    assert len(result.split.held_out) == 12  # 6 of the 20 distinct rows, each twice
    assert shown and not shown & held
