"""Retrieval metric names as values: parse `ndcg@10`, `map`, `P@5` into measures."""

from __future__ import annotations

import difflib
import numbers
import re
from collections.abc import Iterable
from dataclasses import dataclass

from judge.errors import JudgeError, UnknownMetricError


class MeasureFormError(UnknownMetricError):
    """A retrieval family's name with a bad cutoff or form (`ndcg@0`, `recall`): not a
    misspelling, and not a name some other metric may have."""


# family -> (needs a cutoff: "required" | "optional" | "none", one-line definition)
FAMILIES: dict[str, tuple[str, str]] = {
    "P": ("required", "relevant docs in the top k / k (trec_eval P_k)"),
    "recall": ("required", "relevant docs in the top k / relevant judged docs (recall_k)"),
    "hit_rate": ("required", "1 if a relevant doc is in the top k, else 0 (success_k)"),
    "mrr": ("optional", "1 / rank of the first relevant doc, 0 past k (recip_rank)"),
    "map": ("optional", "average precision over relevant judged docs (map, map_cut_k)"),
    "ndcg": ("optional", "nDCG, gain = grade, log2 discount (ndcg, ndcg_cut_k)"),
    "ndcg_exp": ("optional", "nDCG with gain 2^grade - 1 (Burges et al.)"),
    "r_precision": ("none", "relevant docs in the top R / R, R = relevant judged docs (Rprec)"),
    "bpref": ("none", "mean over relevant docs of 1 - judged non-relevant above / min(R, N)"),
    "judged": ("required", "docs with a judgment in the top k / k (1 - trec_eval's unj_k)"),
}

# Families that read the judged non-relevant documents of a run, not only its relevant ones.
JUDGED_FAMILIES = frozenset({"bpref", "judged"})

# What `judge ir` and `judge eval` (on rows with retrieval columns) compute unless told.
DEFAULT_METRICS = (
    "P@5",
    "P@10",
    "recall@10",
    "hit_rate@10",
    "mrr",
    "map",
    "ndcg@10",
    "r_precision",
)

# Names users bring from trec_eval or other tools, mapped to ours for a helpful error.
_TREC_NAMES = {
    "P_": "P@",
    "recall_": "recall@",
    "success_": "hit_rate@",
    "map_cut_": "map@",
    "ndcg_cut_": "ndcg@",
    "recip_rank": "mrr",
    "Rprec": "r_precision",
}

# Other tools' names for our families, suggested with the cutoff given (`precision@10`
# -> `P@10`) rather than the closest spelling (`r_precision`).
_ALIASES = {"precision": "P", "prec": "P", "p": "P", "success": "hit_rate", "hits": "hit_rate"}

# The largest cutoff: beyond any ranking's length, and well inside the int64 the arrays use.
MAX_CUTOFF = 1_000_000_000

_NAME = re.compile(r"^([A-Za-z_]+)(?:@(\d+))?$")


@dataclass(frozen=True)
class Measure:
    """One retrieval metric: a family and an optional cutoff k."""

    family: str
    k: int | None = None

    @property
    def name(self) -> str:
        """The metric's name as a value: `ndcg@10`, `map`."""
        return self.family if self.k is None else f"{self.family}@{self.k}"


def valid_names() -> list[str]:
    """The metric name patterns accepted, for help texts and error messages."""
    out = []
    for family, (cutoff, _) in FAMILIES.items():
        if cutoff in ("none", "optional"):
            out.append(family)
        if cutoff in ("required", "optional"):
            out.append(f"{family}@k")
    return out


# Cutoffs tried for a name close to one of ours (with the cutoff the name gives, if any).
_USUAL_CUTOFFS = (5, 10, 20, 100)


def retrieval_names(name: str = "") -> list[str]:
    """Concrete retrieval metric names a misspelt `name` may have meant: every family at
    the usual cutoffs, and at the cutoff `name` gives (`ndgc@7` -> `ndcg@7`)."""
    given = _cutoff(name)
    cutoffs = [*_USUAL_CUTOFFS, *([given] if given is not None else [])]
    out = []
    for family, (cutoff, _) in FAMILIES.items():
        if cutoff in ("none", "optional"):
            out.append(family)
        if cutoff in ("required", "optional"):
            out += [f"{family}@{k}" for k in cutoffs]
    return out


def _cutoff(name: str) -> int | None:
    """The valid cutoff k a name gives after its `@`, if it gives one."""
    given = name.rpartition("@")[2] if "@" in name else ""
    k = int(given) if given.isascii() and given.isdigit() else 0
    return k if 1 <= k <= MAX_CUTOFF else None


def cutoff_of(name: str, family: str) -> int | None:
    """k when `name` is `family@k` with a valid cutoff (1 to MAX_CUTOFF), else None: the one
    reading of a name's cutoff, for retrieval names and for judged ones (`context_ndcg@5`)."""
    match = _NAME.match(name)
    if match is None or match.group(1) != family or match.group(2) is None:
        return None
    return _cutoff(name)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """The known name closest to a misspelt one (case aside), or None when none is close:
    a trec_eval name's or another tool's own spelling first (`ndcg_cut_10` -> `ndcg@10`,
    `precision@10` -> `P@10`); never `name` itself."""
    for trec, ours in _TREC_NAMES.items():
        if ours.endswith("@") and name.startswith(trec) and name[len(trec) :].isdigit():
            return f"{ours}{name[len(trec) :]}"
        if name == trec:
            return ours
    family, at, _ = name.partition("@")
    alias = _ALIASES.get(family.lower())
    if alias is not None and alias != family:
        k = _cutoff(name)
        if k is not None or not at:
            return f"{alias}@{k if k is not None else 10}"
    by_lower = {c.lower(): c for c in reversed(list(candidates)) if c != name}
    close = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.7)
    return by_lower[close[0]] if close else None


def _suggest(name: str) -> str:
    for family in FAMILIES:
        if name.split("@")[0].lower() == family.lower() and name.split("@")[0] != family:
            return f" (names are case-sensitive: '{family}')"
    return ""


def parse_measure(name: str) -> Measure:
    """Parse one metric name; raise UnknownMetricError listing the valid names."""
    match = _NAME.match(name) if isinstance(name, str) else None
    if match is not None:
        family, k_text = match.group(1), match.group(2)
        spec = FAMILIES.get(family)
        if spec is not None:
            cutoff = spec[0]
            k = int(k_text) if k_text is not None else None
            if k is not None and k < 1:
                raise MeasureFormError(f"metric '{name}': the cutoff k must be at least 1")
            if k is not None and k > MAX_CUTOFF:
                raise MeasureFormError(
                    f"metric '{name}': the cutoff k must be at most {MAX_CUTOFF}"
                )
            if k is None and cutoff == "required":
                raise MeasureFormError(
                    f"metric '{name}': write it as '{family}@k', e.g. '{family}@10'"
                )
            if k is not None and cutoff == "none":
                raise MeasureFormError(f"metric '{name}': write it as '{family}', without @k")
            return Measure(family, k)
    text = str(name)
    unj = re.match(r"^unj[_@](\d+)$", text)
    if unj is not None and _cutoff(f"@{unj.group(1)}") is not None:
        k = int(unj.group(1))
        raise UnknownMetricError(
            f"unknown retrieval metric {name!r}: judge computes its complement, "
            f"'judged@{k}' = 1 - trec_eval's unj_{k}"
        )
    hint = _suggest(text)
    close = None if hint else did_you_mean(text, retrieval_names(text))
    if close is not None:
        family = close.split("@")[0]
        form = f" ({family}@k takes any cutoff k)" if "@" in close else ""
        raise UnknownMetricError(
            f"unknown retrieval metric {name!r}; did you mean {close!r}?{form}"
        )
    raise UnknownMetricError(
        f"unknown retrieval metric {name!r}{hint}; "
        f"valid names: {', '.join(valid_names())} (k a positive integer, e.g. ndcg@10)"
    )


def parse_measures(names: str | list[str] | tuple[str, ...]) -> list[Measure]:
    """Parse metric names (a list or a comma-separated string), in order, without repeats."""
    if isinstance(names, str):
        names = [n for n in (part.strip() for part in names.split(",")) if n]
    measures: list[Measure] = []
    for name in names:
        measure = parse_measure(name)
        if measure not in measures:
            measures.append(measure)
    if not measures:
        raise UnknownMetricError(f"no metric given; valid names: {', '.join(valid_names())}")
    return measures


def check_relevance_level(level: object) -> int:
    """The relevance level as an int; refuse one that is not an integer of at least 1
    (a numpy integer is one; a bool or a float is not).

    trec_eval's `-l 0` counts every judged document as relevant (grade 0 too), and a
    negative level also the retrieved documents not judged at all (its P and MAP then
    count them relevant while its recall and MAP denominators do not); judge ranks only
    positively graded documents, so it would give other values: it refuses them.
    """
    if isinstance(level, bool) or not isinstance(level, numbers.Integral):
        raise JudgeError(f"relevance_level must be an integer, got {level!r}")
    level = int(level)
    if level < 1:
        raise JudgeError(
            f"relevance_level {level}: give 1 or more, the smallest grade that counts as "
            "relevant (trec_eval's -l 0 counts the documents judged non-relevant as "
            "relevant, and a level below 0 those not judged too: judge does not compute "
            "those)"
        )
    return level
