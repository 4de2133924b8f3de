"""Text measures of the test-set builder: language, tokens for BM25, overlap, near duplicates.

Tokens are lowercased Latin words and digits, plus CJK character bigrams (and single
characters), so Chinese text is searchable without a word segmenter.
"""

from __future__ import annotations

import re
import unicodedata

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[^\W_{_CJK}]+|[{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]+")
_SPACE = re.compile(r"\s+")
# Function words carry no evidence of copying or of topic; kept short on purpose.
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "which",
        "who",
        "with",
        "how",
        "when",
        "where",
        "why",
        "does",
        "did",
        "do",
    ]
)


def is_cjk(char: str) -> bool:
    """True for a Han character."""
    return bool(_CJK_RUN.fullmatch(char))


def language(text: str) -> str:
    """ "zh" when Han characters are at least a fifth of the letters, else "en"."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "en"
    han = sum(1 for c in letters if is_cjk(c))
    return "zh" if han / len(letters) >= 0.2 else "en"


def normalise(text: str) -> str:
    """NFKC, lowercased, whitespace collapsed: the form quotes and questions are compared in."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().lower()


def tokens(text: str) -> list[str]:
    """BM25 tokens: Latin words (no stop words) and CJK unigrams and bigrams."""
    out: list[str] = []
    for run in _WORD.findall(normalise(text)):
        if is_cjk(run[0]):
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif run not in _STOP:
            out.append(run)
    return out


def content_terms(text: str) -> set[str]:
    """Distinct content tokens (stop words and single CJK characters left out)."""
    return {t for t in tokens(text) if not (len(t) == 1 and is_cjk(t))}


def overlap(question: str, source: str) -> float:
    """Share of the question's content terms that occur in the source (0 when none)."""
    terms = content_terms(question)
    if not terms:
        return 0.0
    return len(terms & content_terms(source)) / len(terms)


def shingles(text: str, size: int = 3) -> set[str]:
    """Character shingles of the normalised text (spaces removed), for near duplicates."""
    compact = re.sub(r"[\W_]+", "", normalise(text))
    if len(compact) <= size:
        return {compact}
    return {compact[i : i + size] for i in range(len(compact) - size + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    """Jaccard similarity of two sets (1 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def size(text: str) -> float:
    """Rough word count: Latin words plus Han characters / 2 (a Chinese word is ~2)."""
    words = 0.0
    for run in _WORD.findall(text):
        words += len(run) / 2 if is_cjk(run[0]) else 1
    return words


_QUOTES = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"'})


def _fold(char: str) -> str:
    """One character compared loosely: NFKC (full-width forms), lower case, straight quotes;
    the character itself when folding would change the length (spans must map back)."""
    folded = unicodedata.normalize("NFKC", char).lower().translate(_QUOTES)
    return folded if len(folded) == 1 else char


def find_quote(quote: str, text: str) -> tuple[int, int] | None:
    """(start, end) of quote in text: exact first, then ignoring case, runs of spaces,
    full-width forms and curly quotes (models retype quotes so)."""
    if not quote.strip():
        return None
    at = text.find(quote)
    if at >= 0:
        return at, at + len(quote)
    # Map each character of a folded copy back to its place in text.
    folded, where = [], []
    previous_space = False
    for i, c in enumerate(text):
        if c.isspace():
            if previous_space:
                continue
            previous_space = True
            folded.append(" ")
        else:
            previous_space = False
            folded.append(_fold(c))
        where.append(i)
    needle = "".join(_fold(c) for c in _SPACE.sub(" ", quote.strip()))
    at = "".join(folded).find(needle)
    if at < 0:
        return None
    return where[at], where[at + len(needle) - 1] + 1
