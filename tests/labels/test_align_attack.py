"""Attacks on `judge align` and prompt sets (issue 42): duplicate rows across the split,
splits without a label, candidates whose folders collide, a set file edited in place."""

from __future__ import annotations

import os

from judge.metrics.prompts import load_prompt_set, prompts_dir


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
