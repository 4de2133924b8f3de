"""What a metric's evidence says about its score, as findings a report formats.

Each metric turns a row's evidence into findings (`Metric.findings`); the HTML report, the
pytest failure message and the OpenTelemetry explanation only format them, so a new metric
brings its own and no renderer knows a metric by name. A finding is a title, a one-line
summary (short and deterministic: a trace view shows it in one cell) and items (a claim, a
context, a question...) each with a verdict and whether it is good.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from judge.formatting import counted, number
from judge.metrics.evidence import (
    ANSWER,
    ANSWER_CLAIMS_UNSOURCED,
    CITATION_CHECKS,
    CITATIONS,
    CONTEXT_GRADES,
    CONTEXT_GRADES_CAPPED,
    CONTEXT_SENTENCES,
    CORRECTNESS,
    GOAL,
    QUERY_REWRITE,
    RETENTION,
    REVERSE_QUESTIONS,
    TRAJECTORY,
    TRUTH,
    ClaimVerdict,
    Evidence,
    claims_key,
    context_text,
    verdicts_key,
)

# The sample fields a finding can be about (a report shows it beside that field).
ABOUT_ANSWER, ABOUT_TRUTH, ABOUT_CONTEXTS = "answer", "ground_truth", "contexts"
ABOUT_FIELDS = (ABOUT_ANSWER, ABOUT_TRUTH, ABOUT_CONTEXTS)

_LISTED = 3  # items named in a summary; the rest are counted
_CLAIM_CHARS = 80  # a claim quoted in a summary


@dataclass(frozen=True)
class Item:
    """One thing a finding lists: a claim, a context, a generated question, a citation.

    Attributes:
        name: what it is, numbered from 1 ("answer claim 2", "context 1").
        text: its text (the claim, the context, the question), or ''.
        verdict: what the judge found of it ("not found", "graded 0 of 3").
        ok: True when it speaks for the score, False against, None for neither.
        reason: the judge's reason, or ''.
        source: what it rests on ("context 1"), or ''.
    """

    name: str
    text: str
    verdict: str
    ok: bool | None
    reason: str = ""
    source: str = ""


@dataclass(frozen=True)
class Finding:
    """What one piece of a row's evidence says.

    Attributes:
        title: what it is ("answer claims", "context grades").
        summary: one line saying it, short enough for a trace view's cell.
        items: the pieces, in the order judged.
        about: the sample field it is about (`answer`, `ground_truth`, `contexts`), or None.
        keys: the evidence keys it shows (a report shows the others as they are).
    """

    title: str
    summary: str
    items: tuple[Item, ...] = ()
    about: str | None = None
    keys: frozenset[str] = frozenset()


# A metric's findings: from its name, the row's evidence and the row's contexts.
FindingsOf = Callable[[str, Evidence, Sequence[str]], list[Finding]]


def _clip(text: str, limit: int = _CLAIM_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _words(verdict: str) -> str:
    return verdict.replace("_", " ")


def _context_name(context: object) -> str:
    if isinstance(context, int) and not isinstance(context, bool):
        return f"context {context + 1}"
    return "" if context is None else str(context)


def claims_findings(side: str) -> FindingsOf:
    """The findings of a metric on one side's claims verified against the contexts: which
    were not supported, and why."""
    what = "answer claim" if side == ANSWER else "ground-truth claim"
    about = ABOUT_ANSWER if side == ANSWER else ABOUT_TRUTH
    # The claims dropped as not drawn from their text, and the verdicts borrowing the
    # prompt example's words, are not findings of the score: a report shows them as kept.
    keys = frozenset({claims_key(side), verdicts_key(side)})

    def findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
        found = evidence.claims(side)
        if found is None or found.verdicts is None:
            return []
        verdicts = found.verdicts
        items = tuple(
            Item(
                f"{what} {v.claim + 1 if v.claim is not None else '?'}",
                found.claim(v.claim),
                _words(v.verdict),
                v.ok,
                v.reason,
                _context_name(v.context),
            )
            for v in verdicts
        )
        bad = [v for v in verdicts if not v.ok]
        if not verdicts:
            summary = f"no {what}s were found"
        elif not bad:
            summary = f"{counted(len(verdicts), what)}, all supported by the contexts"
        else:
            named = [
                f"{_clip(found.claim(v.claim))!r} ({v.verdict}: {v.reason})" for v in bad[:_LISTED]
            ]
            more = f"; and {len(bad) - _LISTED} more" if len(bad) > _LISTED else ""
            summary = (
                f"{len(bad)} of {counted(len(verdicts), what)} not supported by the contexts: "
                + "; ".join(named)
                + more
            )
        return [Finding(f"{what}s", summary, items, about, keys)]

    return findings


def unsourced_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """The answer claims naming numbers or names that no context mentions (which the strict
    faithfulness counts as unsupported)."""
    found = evidence.unsourced()
    if not found:
        return []
    claims = evidence.claims(ANSWER)
    items = tuple(
        Item(
            f"answer claim {u.claim + 1 if u.claim is not None else '?'}",
            claims.claim(u.claim) if claims is not None else "",
            "names what no context mentions",
            False,
            ", ".join(u.terms),
        )
        for u in found
    )
    summary = "; ".join(f"{i.name} names what no context mentions: {i.reason}" for i in items)
    return [
        Finding(
            "answer claims naming what no context mentions",
            summary,
            items,
            ABOUT_ANSWER,
            frozenset({ANSWER_CLAIMS_UNSOURCED}),
        )
    ]


def verdicts_and_unsourced(
    metric: str, evidence: Evidence, contexts: Sequence[str]
) -> list[Finding]:
    """The answer claims' verdicts, then the claims naming what no context mentions."""
    return [
        *claims_findings(ANSWER)(metric, evidence, contexts),
        *unsourced_findings(metric, evidence, contexts),
    ]


def grades_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """The contexts' grades 0-3, those below 2 (not relevant) against the score."""
    grades = evidence.context_grades()
    if not grades:
        return []
    capped = evidence.capped_contexts()
    items = tuple(
        Item(
            _context_name(g.context) or "context ?",
            context_text(contexts, g.context),
            f"graded {g.raw.get('grade')} of 3",
            g.relevant,
            g.reason
            + (" (capped at 1: no content shared with the topic)" if g.context in capped else ""),
        )
        for g in grades
    )
    shown = ", ".join(str(g.raw.get("grade")) for g in grades)
    return [
        Finding(
            "context grades",
            f"context grades (0-3) in rank order: {shown}",
            items,
            ABOUT_CONTEXTS,
            frozenset({CONTEXT_GRADES, CONTEXT_GRADES_CAPPED}),
        )
    ]


def reverse_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """The questions generated from the answer and their similarity to the question, or
    that the answer is noncommittal."""
    found = evidence.reverse_questions()
    if found is None:
        return []
    keys = frozenset({REVERSE_QUESTIONS})
    if found.noncommittal:
        return [
            Finding(
                "reverse questions",
                "the judge found the answer noncommittal (it evades the question)",
                about=ABOUT_ANSWER,
                keys=keys,
            )
        ]
    sims = found.similarities
    items = tuple(
        Item(
            f"reverse question {i + 1}",
            q,
            f"has similarity {number(sims[i])}" if i < len(sims) else "has no similarity",
            None,
        )
        for i, q in enumerate(found.questions)
    )
    shown = ", ".join(f"{s:.2f}" for s in sims)
    summary = f"similarity of the question to questions generated from the answer: {shown}"
    return [Finding("reverse questions", summary, items, ABOUT_ANSWER, keys)]


def correctness_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """The answer's claims checked against the ground truth and the ground truth's against
    the answer (the two directions of the F1)."""
    found = evidence.correctness()
    if found is None:
        return []
    answer, truth = evidence.claims(ANSWER), evidence.claims(TRUTH)

    def side(
        verdicts: tuple[ClaimVerdict, ...],
        what: str,
        claims_text: Callable[[int | None], str],
        other: str,
    ) -> list[Item]:
        return [
            Item(
                f"{what} {v.claim + 1 if v.claim is not None else '?'}",
                claims_text(v.claim),
                f"{_words(v.verdict)} in the {other}",
                v.ok,
                v.reason,
            )
            for v in verdicts
        ]

    items = side(
        found.answer_vs_truth,
        "answer claim",
        answer.claim if answer is not None else (lambda _: ""),
        "ground truth",
    ) + side(
        found.truth_vs_answer,
        "ground-truth claim",
        truth.claim if truth is not None else (lambda _: ""),
        "answer",
    )
    a = sum(v.ok for v in found.answer_vs_truth)
    t = sum(v.ok for v in found.truth_vs_answer)
    summary = (
        f"answer claims supported by the ground truth: {a} of {len(found.answer_vs_truth)}; "
        f"ground-truth claims supported by the answer: {t} of {len(found.truth_vs_answer)}"
    )
    return [
        Finding(
            "answer and ground truth compared",
            summary,
            tuple(items),
            None,
            frozenset({CORRECTNESS}),
        )
    ]


def citation_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """The answer's citations whose cited context does not support the citing statement."""
    checks = evidence.citation_checks()
    if not checks:
        return []
    # The checks are numbered among the citations that name an existing context.
    checked = [c for c in evidence.citations() if c.context is not None]

    def cited(number: int | None) -> tuple[str, str]:
        if number is None or not 0 <= number < len(checked):
            return "", ""
        return checked[number].statement, _context_name(checked[number].context)

    items = tuple(
        Item(
            f"citation {c.check + 1 if c.check is not None else '?'}",
            cited(c.check)[0],
            "supported" if c.supported else "not supported",
            c.supported,
            c.reason,
            cited(c.check)[1],
        )
        for c in checks
    )
    bad = [c for c in checks if not c.supported]
    if not bad:
        summary = f"{counted(len(checks), 'citation')}, all supported by the cited context"
    else:
        reasons = "; ".join(c.reason for c in bad[:_LISTED])
        summary = f"{len(bad)} of {counted(len(checks), 'citation')} not supported: {reasons}"
    return [
        Finding("citations", summary, items, ABOUT_ANSWER, frozenset({CITATIONS, CITATION_CHECKS}))
    ]


def focus_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """How many of the contexts' sentences the question needs, and the judge's reason."""
    found = evidence.context_sentences()
    if found is None:
        return []
    total = sum(found.per_context)
    summary = f"{len(found.needed)} of {counted(total, 'context sentence')} needed. {found.reason}"
    return [
        Finding(
            "context sentences needed",
            summary.strip(),
            about=ABOUT_CONTEXTS,
            keys=frozenset({CONTEXT_SENTENCES}),
        )
    ]


# The fields of a judge's reply that say why, in the order looked for.
_WHY = ("explanation", "reason", "reasoning", "rationale")


def reply_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """The default: a custom metric's judge reply, kept under the metric's name; its
    explanation (or reason, reasoning, rationale) as the summary, else the reply as JSON."""
    reply = evidence.reply(metric)
    if reply is None:
        return []
    text = ""
    if isinstance(reply, Mapping):
        text = next((reply[k] for k in _WHY if isinstance(reply.get(k), str)), "")
    if not text.strip():
        text = json.dumps(reply, ensure_ascii=False, sort_keys=True)
    return [Finding(f"{metric} reply", " ".join(text.split()), keys=frozenset({metric}))]


_FORGOT = ("contradicted", "asked_again")


def retention_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """What a turn's answer did with each earlier message of the user: those it contradicted
    or asked for again."""
    found = evidence.reply(RETENTION)
    if not isinstance(found, list):
        return []
    verdicts = [v for v in found if isinstance(v, Mapping)]
    items = tuple(
        Item(
            f"earlier user message {int(v.get('statement', 0)) + 1}",
            "",
            _words(str(v.get("verdict", "?"))),
            None if v.get("verdict") == "unrelated" else v.get("verdict") not in _FORGOT,
            str(v.get("reason", "")),
        )
        for v in verdicts
    )
    bad = [v for v in verdicts if v.get("verdict") in _FORGOT]
    if not bad:
        summary = f"keeps all {counted(len(verdicts), 'earlier user message')}"
    else:
        named = [f"{_words(str(v.get('verdict')))}: {v.get('reason', '')}" for v in bad[:_LISTED]]
        summary = (
            f"{len(bad)} of {counted(len(verdicts), 'earlier user message')} not kept: "
            + "; ".join(named)
        )
    return [Finding("earlier user messages", summary, items, ABOUT_ANSWER, frozenset({RETENTION}))]


def query_rewrite_findings(
    metric: str, evidence: Evidence, contexts: Sequence[str]
) -> list[Finding]:
    """What the judge said of a turn's retriever query."""
    found = evidence.reply(QUERY_REWRITE)
    if not isinstance(found, Mapping):
        return []
    verdict, reason = str(found.get("verdict", "?")), str(found.get("reason", ""))
    item = Item("retriever query", "", _words(verdict), verdict == "faithful", reason)
    summary = f"the query is {_words(verdict)}: {reason}"
    return [Finding("retriever query", summary, (item,), None, frozenset({QUERY_REWRITE}))]


def goal_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """What the judge said of a conversation against its expected outcome."""
    found = evidence.reply(GOAL)
    if not isinstance(found, Mapping):
        return []
    verdict, reason = str(found.get("verdict", "?")), str(found.get("reason", ""))
    item = Item("expected outcome", "", _words(verdict), verdict == "achieved", reason)
    summary = f"the conversation {_words(verdict)} its expected outcome: {reason}"
    return [Finding("conversation outcome", summary, (item,), None, frozenset({GOAL}))]


# What a trajectory settled without the judge is, in a report's words.
_SETTLED = {
    "same_calls": "the calls made are the expected ones (no request)",
    "nothing_called": "no tool was called where calls were expected (no request)",
}


def trajectory_findings(metric: str, evidence: Evidence, contexts: Sequence[str]) -> list[Finding]:
    """What the judge (or the deterministic comparison) said of the tool calls made."""
    found = evidence.reply(TRAJECTORY)
    if not isinstance(found, Mapping):
        return []
    verdict = str(found.get("verdict", "?"))
    settled = found.get("settled")
    reason = _SETTLED.get(str(settled), str(settled)) if settled else str(found.get("reason", ""))
    item = Item("tool calls", "", _words(verdict), verdict == "sound", reason)
    summary = f"the tool calls are {_words(verdict)}: {reason}"
    return [Finding("tool-call trajectory", summary, (item,), None, frozenset({TRAJECTORY}))]
