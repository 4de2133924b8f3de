"""Word overlap of a claim with the text it should come from: a check that needs no model.

A claims call can return claims of the wrong text (a prompt example's, or the other text's
when several are split together). A claim drawn from its text shares most of its content
words with it (or with the question, which resolves its pronouns); a copied one does not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

# CJK characters carry a word's meaning each and are not space-separated, so they are tokens.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_WORD = re.compile(r"\w+")

# Below this share of its content words found in its text, a claim is not drawn from it.
MIN_SHARE = 0.5


@functools.lru_cache(maxsize=4096)
def content_tokens(text: str) -> frozenset[str]:
    """The words that carry content: numbers, words of 4+ letters, CJK characters.

    Kept for the last few thousand texts: a sample's question and contexts are compared
    with each of its claims and grades, and a replayed run asks again for every row.
    """
    lowered = text.lower()
    # ASCII text has no CJK character: its tokens are the plain word runs, found faster.
    found = _WORD.findall(lowered) if lowered.isascii() else _TOKEN.findall(lowered)
    # Each distinct word checked once (a text repeats its words).
    return frozenset([t for t in set(found) if len(t) >= 4 or _short(t)])


@functools.lru_cache(maxsize=65536)
def _short(token: str) -> bool:
    """Whether a token of 1-3 characters carries content: a CJK character, or a number
    (str.isdigit's digits). Few such tokens exist ("the", "of", "42"): each is decided once."""
    return bool(_CJK_CHAR.match(token)) or any(c.isdigit() for c in token)


def share_in(claim: str, source: str) -> float:
    """Share of the claim's content words that occur in source (1.0 when it has none)."""
    words = content_tokens(claim)
    if not words:
        return 1.0
    return len(words & content_tokens(source)) / len(words)


def drawn_from(claim: str, text: str, question: str = "") -> bool:
    """Whether the claim comes from text: most of its content words are in the text or in
    the question (claims name what a pronoun refers to from the question)."""
    return share_in(claim, f"{text}\n{question}") >= MIN_SHARE


def drawn_from_all(claims: Sequence[str], text: str, question: str = "") -> list[str]:
    """The claims `drawn_from` text, in order: the text's words found once for them all."""
    source = content_tokens(f"{text}\n{question}")
    kept = []
    for claim in claims:
        words = content_tokens(claim)
        if not words or len(words & source) / len(words) >= MIN_SHARE:
            kept.append(claim)
    return kept


def _cjk(text: str) -> bool:
    # str.isascii reads a flag of the string; the search reads every character.
    return not text.isascii() and _CJK_CHAR.search(text) is not None


def shares_content(text: str, other: str) -> bool:
    """Whether text has a content word in common with other; True when one is written in
    CJK characters and the other not, where words cannot be compared."""
    if _cjk(text) != _cjk(other):
        return True
    return not content_tokens(text).isdisjoint(content_tokens(other))


def holds_answer_words(text: str, reference: str, question: str) -> bool:
    """Whether text has a content word of the reference that the question does not have
    (a word of the answer itself). True when the reference has no such word, or when text
    and reference are not both CJK or both not, where words cannot be compared."""
    if _cjk(text) != _cjk(reference):
        return True
    answer = content_tokens(reference) - content_tokens(question)
    return not answer or not answer.isdisjoint(content_tokens(text))


def borrowed_words(reason: str, example: str, own: Sequence[str]) -> list[str]:
    """The content words of a judge's reason that come from its prompt's example and not
    from the data it was given, `own` (a reason about the example's museum for a claim
    about a railway: the judge copied the example instead of judging)."""
    candidates = content_tokens(reason) & content_tokens(example)
    # Most reasons share no word with the example: the data's words are not looked up.
    return sorted(w for w in candidates if not any(w in content_tokens(t) for t in own))


# Numbers and names are what an unsupported claim most often gets wrong (a date, a person, a
# place), and whether a context mentions them needs no model. Words are compared with
# separators dropped, so "PSLV-C56" matches "PSLV C56" and "1,000" matches "1000".
_TERM = re.compile(rf"[^\W_{_CJK}]+(?:[.,:][0-9]+)*")
# A full stop after one capital letter ends an initial ("J. Robert"), not a sentence.
_SENTENCE_END = re.compile(r"(?<!\b[A-Z])[.!?][\"'\u201d)\]]*\s*$")
_NUMBER_WORDS = re.findall(
    r"\w+",
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty",
)


def _squash(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def named_terms(claim: str) -> list[str]:
    """A claim's numbers and capitalised words, sentence-initial words excepted: the terms
    a source must mention for the claim to come from it."""
    terms: list[str] = []
    for match in _TERM.finditer(claim):
        term = match.group()
        before = claim[: match.start()]
        number = any(c.isdigit() for c in term)
        name = term[0].isupper() and before.strip() and not _SENTENCE_END.search(before)
        if number or name:
            terms.append(term)
    return list(dict.fromkeys(terms))


def unsourced_terms(claim: str, sources: list[str]) -> list[str]:
    """The claim's numbers and names that no source mentions (case and separators ignored;
    a number written as a word, "four", counts as 4).

    Args:
        claim: one claim of an answer.
        sources: the texts it should come from (the contexts).
    """
    terms = named_terms(claim)
    if not terms:
        return []
    words, text = _mentioned(tuple(sources))
    unsourced = []
    for term in terms:
        squashed = _squash(term)
        # A name may be written with other separators ("Jean-Luc" / "Jean Luc"); a number
        # is compared whole ("4" is not found inside "1948").
        number = any(c.isdigit() for c in term)
        if squashed not in words and (number or squashed not in text):
            unsourced.append(term)
    return unsourced


@functools.lru_cache(maxsize=64)
def _mentioned(sources: tuple[str, ...]) -> tuple[frozenset[str], str]:
    """The sources' squashed words (number words also as digits) and squashed text, made
    once for all the claims checked against the same contexts."""
    words = {_squash(t) for source in sources for t in _TERM.findall(source)}
    words |= {str(n) for n, word in enumerate(_NUMBER_WORDS) if word in words}
    return frozenset(words), "".join(_squash(source) for source in sources)
