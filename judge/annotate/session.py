"""One person labelling one run's rows: the run read and checked, the draw fixed by the
labels file's first session, the person's labels so far, and each new label appended."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.annotate.labels_file import SAMPLE, LabelsLog, LabelsWriter, now, read_labels_file
from judge.annotate.sample import ORDERS, Draw, Order, draw, question_for, row_payload
from judge.errors import InputFormatError, JudgeError
from judge.labels.annotators import AnnotatorAgreement, annotator_agreement
from judge.run.folder import RunFolder
from judge.run.rows import ResultRow

DEFAULT_METRIC = "faithfulness"
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Choice:
    """What the user asked for; None where the labels file (or the default) decides."""

    metric: str | None = None
    order: Order | None = None
    seed: int | None = None
    sample: int | None = None


class Annotation:
    """A run's rows to label and one annotator's labels of them.

    Args:
        results: the run's folder or its results.jsonl.
        labels: the labels file (made when absent).
        annotator: who labels.
        choice: the metric and the draw asked for; a labels file already begun fixes
            them, and a different one asked for is refused.
    """

    def __init__(
        self,
        results: str | os.PathLike[str],
        labels: str | os.PathLike[str],
        *,
        annotator: str,
        choice: Choice = Choice(),
    ):
        if not annotator.strip():
            raise InputFormatError("the annotator's name is empty: give --annotator NAME")
        folder = RunFolder.of(results)
        if not folder.results.is_file():
            raise InputFormatError(
                f"{folder.results}: no such results file (judge eval writes results.jsonl)"
            )
        self.results = folder.results
        self.rows: list[ResultRow] = [row for _, _, row in folder.rows()]
        self.results_sha256 = folder.results_sha256()
        self.ids = [str(row.id) for row in self.rows]
        doubled = sorted(i for i, n in Counter(self.ids).items() if n > 1)
        if doubled:
            raise InputFormatError(
                f"{self.results}: ids {', '.join(map(repr, doubled[:5]))} name several rows: "
                "a label is joined to its row by id; give the run unique ids (an id column)"
            )
        self.labels = Path(labels)
        self.annotator = annotator
        if self.labels.is_file() and self.labels.samefile(self.results):
            raise InputFormatError(
                f"--labels {self.labels} is the run's results file: labels are appended to "
                "a file of their own; give a new one (labels.jsonl)"
            )
        self.log = read_labels_file(self.labels)
        if not self.log.labels and self.log.unreadable():
            # Never append to a file that is no labels file (a run's summary.json, ...).
            raise InputFormatError(
                f"{self.labels} holds no label record ({self.log.problems[0]}): it is no "
                "labels file, and judge annotate appends to its labels file; give a new "
                "--labels file"
            )
        # Whether this session drew the rows itself: another may begin the file meanwhile.
        self._drew = self.log.drawn() is None
        self.draw, self.metric = self._draw(choice)
        self.position_of = {row: at for at, row in enumerate(self.draw.rows)}
        self.index_of = {self.ids[row]: row for row in self.draw.rows}
        self.mine = {
            self.index_of[ident]: record
            for (_, ident), record in self.log.latest(annotator).items()
            if ident in self.index_of
        }
        self._writer: LabelsWriter | None = None

    def _draw(self, choice: Choice) -> tuple[Draw, str]:
        """The draw the labels file's first label was given in, or the one asked for."""
        first = self.log.drawn()
        if first is None:
            metric = choice.metric or self._default_metric()
            found = draw(
                self.rows,
                metric,
                order=choice.order or "random",
                seed=DEFAULT_SEED if choice.seed is None else choice.seed,
                sample=choice.sample,
            )
            return found, metric
        if first.get("results_sha256") != self.results_sha256:
            raise InputFormatError(
                f"the labels in {self.labels} were drawn from another results file (sha256 "
                f"{str(first.get('results_sha256'))[:12]}); {self.results} has sha256 "
                f"{self.results_sha256[:12]}: give that run, or a new --labels file"
            )
        sample = _repeatable(first[SAMPLE], self.labels)
        began = {
            "--metric": first.get("metric"),
            "--order": sample.get("method"),
            "--seed": sample.get("seed"),
            "--sample": sample.get("n"),
        }
        asked = {
            "--metric": choice.metric,
            "--order": choice.order,
            "--seed": choice.seed,
            # more rows than the run has draws them all, and records that many
            "--sample": None if choice.sample is None else min(choice.sample, len(self.rows)),
        }
        for flag, value in asked.items():
            if value is not None and value != began[flag]:
                raise InputFormatError(
                    f"{self.labels} was begun with {flag} {began[flag]}: every annotator "
                    f"labels the same draw; leave {flag} out, or give a new --labels file"
                )
        metric = str(began["--metric"])
        found = draw(
            self.rows, metric, order=sample["method"], seed=sample["seed"], sample=sample["n"]
        )
        return found, metric

    def _default_metric(self) -> str:
        names = list(dict.fromkeys(m for row in self.rows for m in row.scores))
        return DEFAULT_METRIC if DEFAULT_METRIC in names or not names else names[0]

    def open(self) -> None:
        """Open the labels file for appending."""
        self._writer = LabelsWriter(self.labels)

    def close(self) -> None:
        """Close the labels file."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def state(self) -> dict[str, Any]:
        """What the page shows above every row, and where to begin."""
        return {
            "annotator": self.annotator,
            "metric": self.metric,
            "question": question_for(self.metric),
            "sampled": self.draw.sampled(),
            "random": self.draw.random,
            "total": len(self.draw.rows),
            "start": self.next_open(-1),
            "problems": list(self.log.problems),
            **self.counts(),
        }

    def counts(self) -> dict[str, int]:
        """Rows labelled and rows skipped (label null) by this annotator."""
        labelled = sum(r.get("label") is not None for r in self.mine.values())
        return {"labelled": labelled, "skipped": len(self.mine) - labelled}

    def next_open(self, after: int) -> int | None:
        """The first position after `after` neither labelled nor skipped by this annotator,
        wrapping round to the start; None when every row is done."""
        total = len(self.draw.rows)
        for step in range(1, total + 1):
            position = (after + step) % total
            if self.draw.rows[position] not in self.mine:
                return position
        return None

    def row(self, position: int) -> dict[str, Any]:
        """The page's data of the row at `position` of the draw, with this person's state."""
        index = self._index(position)
        mine = self.mine.get(index) or {}
        return {
            "position": position,
            **row_payload(self.rows[index], self.metric),
            "mine": {
                "label": mine.get("label"),
                "claims": mine.get("claims") or [],
                "skipped": bool(mine) and mine.get("label") is None,
            },
        }

    def _index(self, position: int) -> int:
        if not 0 <= position < len(self.draw.rows):
            raise InputFormatError(f"no row at position {position} of {len(self.draw.rows)}")
        return self.draw.rows[position]

    def record(
        self, position: int, *, label: int | None, claims: list[bool | None]
    ) -> dict[str, Any]:
        """Append this person's label of a row (None: skipped), synced to disk; returns the
        counts and the next position neither labelled nor skipped."""
        if self._writer is None:
            raise JudgeError("the labels file is not open: call open() first")
        index = self._index(position)
        row = self.rows[index]
        if label not in (0, 1, None):
            raise InputFormatError(f"label {label!r} is not 0, 1 or null")
        record = {
            "id": str(row.id),
            "label": label,
            "annotator": self.annotator,
            "time": now(),
            SAMPLE: self.draw.record(),
            "claims": claims,
            "metric": self.metric,
            "row": index,
            "position": position,
            "results_sha256": self.results_sha256,
        }
        if self._drew:
            self._same_draw_as_the_file()
        self._writer.append(record)
        self._drew = False  # the file's first draw is this one from now on
        self.log.labels.append(record)
        self.mine[index] = record
        return {**self.counts(), "next": self.next_open(position)}

    def _same_draw_as_the_file(self) -> None:
        """Refuse a label of this session's own draw when another session began the file
        with another draw since this one read it (two annotators starting at once)."""
        first = read_labels_file(self.labels).drawn()
        if first is None or (
            first.get(SAMPLE) == self.draw.record() and first.get("metric") == self.metric
        ):
            return
        sample = first[SAMPLE]
        began = " ".join(
            f"{flag} {sample.get(key)}"
            for flag, key in (("--order", "method"), ("--seed", "seed"), ("--sample", "n"))
        )
        raise InputFormatError(
            f"{self.labels} was begun meanwhile by another session with another draw "
            f"(--metric {first.get('metric')} {began}): this label is not kept; stop judge "
            "annotate and start it again without --metric, --order, --seed and --sample, "
            "to label that draw"
        )

    def agreement(self) -> AnnotatorAgreement:
        """The annotators' agreement on the rows of the draw they all labelled."""
        return annotator_agreement(given_labels(self.log, self.index_of))

    def export(self, annotator: str | None = None) -> tuple[list[dict[str, Any]], str]:
        """The labelled rows as `judge agreement` reads them (and `judge estimate`), in the
        draw's order, and a note on what was left out or makes the sample doubtful.

        Args:
            annotator: whose labels; default: the one annotator's, or with several the
                majority of each row's labels (a tie leaves the row out).
        """
        by_row = given_labels(self.log, self.index_of)
        everyone = self.log.annotators()
        if annotator is not None and annotator not in everyone:
            raise InputFormatError(
                f"{self.labels} holds no label by {annotator!r} (annotators: "
                f"{', '.join(everyone) or 'none'}); give one of them with --annotator"
            )
        ties = 0
        chosen: dict[int, int] = {}
        for index, given in by_row.items():
            if annotator is not None:
                if annotator in given:
                    chosen[index] = given[annotator]
                continue
            votes = Counter(given.values()).most_common()
            if len(votes) > 1 and votes[0][1] == votes[1][1]:
                ties += 1
                continue
            chosen[index] = votes[0][0]
        notes = [f"{ties} rows left out: their annotators are split evenly"] if ties else []
        # The rows labelled, ties or not: a tie is no hole in the sample.
        labelled = [i for i, names in by_row.items() if annotator is None or annotator in names]
        done = sorted(self.position_of[i] for i in labelled)
        if self.draw.random and done != list(range(len(done))):
            # Any first k rows of a random draw are a random sample; rows passed over are
            # one only if passing them over had nothing to do with the row.
            notes.append(
                f"the {len(done)} rows labelled are not the first {len(done)} of the draw "
                "(rows skipped or passed over): they are a random sample only if skipping "
                "had nothing to do with the row"
            )
        rows = []
        for index in sorted(chosen, key=self.position_of.__getitem__):
            row = self.rows[index]
            rows.append(
                {
                    "id": str(row.id),
                    "question": row.question,
                    "answer": row.answer,
                    "contexts": row.contexts,
                    "ground_truth": row.ground_truth,
                    "label": chosen[index],
                    "labels": by_row[index],
                    SAMPLE: self.draw.record(),
                }
            )
        return rows, "; ".join(notes)

    def summary(self) -> list[str]:
        """What the command prints when it stops."""
        counts = self.counts()
        lines = [
            f"{self.annotator}: {counts['labelled']} of {len(self.draw.rows)} rows labelled, "
            f"{counts['skipped']} skipped, in {self.labels} ({self.draw.sampled()})"
        ]
        agreement = self.agreement()
        if len(agreement.annotators) > 1:
            lines.append(agreement.text())
        return lines


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _repeatable(sample: dict[str, Any], labels: Path) -> dict[str, Any]:
    """The draw a labels file's first label records, refused unless it can be drawn again
    (a file begun by hand or by another tool may record anything)."""
    n = sample.get("n")
    if (
        sample.get("method") not in ORDERS
        or not _whole(sample.get("seed"))
        or not (n is None or (_whole(n) and n >= 1))
    ):
        raise InputFormatError(
            f"{labels}: the draw its first label records ({json.dumps(sample)}) cannot be "
            f"drawn again: judge annotate needs method {' or '.join(ORDERS)}, a whole "
            "number seed and a number of rows n (1 or more); give a new --labels file"
        )
    return sample


def given_labels(log: LabelsLog, index_of: dict[str, int]) -> dict[int, dict[str, int]]:
    """row -> annotator -> label (0 or 1) of the rows whose ids are given, each person's
    latest."""
    out: dict[int, dict[str, int]] = {}
    for (annotator, ident), record in log.latest().items():
        if ident in index_of and record.get("label") in (0, 1):
            out.setdefault(index_of[ident], {})[annotator] = int(record["label"])
    return out
