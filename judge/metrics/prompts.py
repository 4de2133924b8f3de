"""Prompt files: one per judge, rendered by variable name, versioned by the hash of the file.

A prompt file has a `<<<system>>>` and a `<<<user>>>` section; `{{name}}` marks a variable.
Every value is inserted as JSON, with `<`, `>` and `&` escaped as unicode escapes, so data
can never close the block it sits in (`</answer>`) nor pose as part of the prompt.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from judge.errors import JudgeError
from judge.json_values import sha256_hex
from judge.llm.config import PromptRef

BUILTIN_PROMPTS = (
    "claims",
    "verify",
    "verify_turn",
    "reverse_questions",
    "context_relevance",
    "context_sentences",
    "citations",
    "retention",
    "query_rewrite",
    "goal",
    "trajectory",
)
_VARIABLE = re.compile(r"\{\{(\w+)\}\}")
_SECTION = re.compile(r"^<<<(system|user)>>>[ \t]*$", re.MULTILINE)
_EXAMPLE_HEAD = re.compile(r"^Example(?: \d+)?$")
_EXAMPLE_DATA = re.compile(r"^<\w+>.*</\w+>$", re.MULTILINE)
_HTML_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_UNSAFE = re.compile(r"[<>&]")
# What json.dumps(value, ensure_ascii=False) builds on every call, made once.
_DATA_JSON = json.JSONEncoder(ensure_ascii=False)
# How that encoder writes a string (ensure_ascii=False): the C function where there is one.
_TEXT_JSON = json.encoder.encode_basestring


class PromptError(JudgeError):
    """A prompt file that cannot be used, or values that do not fit it."""


@functools.cache
def prompts_dir() -> Path:
    """The built-in prompts' folder: the package's data judge/prompts (importlib.resources),
    the same in a source checkout and in an installed wheel."""
    from importlib import resources  # imported here: only this lookup needs it

    folder = resources.files("judge") / "prompts"
    if isinstance(folder, Path) and folder.is_dir():
        return folder
    raise PromptError(
        f"the built-in prompts are missing (looked in {folder}): reinstall judge "
        "(pip install --force-reinstall judge); judge must be installed as files, not zipped"
    )


def data_json(value: Any) -> str:
    """JSON for a data block: UTF-8 kept, markup characters escaped."""
    kind = type(value)
    # A text and a list of texts (what the built-in prompts are given) are laid out here as
    # the encoder would: it builds its C encoder again on every call, which cost more than
    # the encoding itself (every judge call of every row renders its data).
    if kind is list and all(type(item) is str for item in value):
        text = "[" + ", ".join([_TEXT_JSON(item) for item in value]) + "]"
    elif kind is str:
        text = _TEXT_JSON(value)
    else:
        text = _DATA_JSON.encode(value)
    if "<" in text or ">" in text or "&" in text:
        return _UNSAFE.sub(lambda m: _HTML_UNSAFE[m.group(0)], text)
    return text


@dataclass(frozen=True)
class Prompt:
    """A parsed prompt file."""

    name: str
    version: str
    system: str
    user: str

    @functools.cached_property
    def ref(self) -> PromptRef:
        """Its name and version, as a cache key records them."""
        return PromptRef(self.name, self.version)

    @functools.cached_property
    def variables(self) -> frozenset[str]:
        """Names of the variables the prompt needs (found once: a render asks every time)."""
        return frozenset(_VARIABLE.findall(self.system + self.user))

    @functools.cached_property
    def example_text(self) -> str:
        """The data lines of the system section's examples (`<claims>[...]</claims>` and the
        like, each on a line of its own), joined: what a reply should never borrow from."""
        return "\n".join(_EXAMPLE_DATA.findall(self.system))

    @functools.cached_property
    def example_reasons(self) -> frozenset[str]:
        """Every "reason" written in the system section's example replies (JSON objects, each
        on a line of its own), as `reason_key`s: what a reply's reason should never repeat."""
        found: set[str] = set()
        for line in self.system.splitlines():
            if line.startswith("{") and '"reason"' in line:
                try:
                    _collect_reasons(json.loads(line), found)
                except json.JSONDecodeError:
                    continue  # prose that happens to start with a brace
        return frozenset(found)

    @functools.cached_property
    def without_examples(self) -> Prompt:
        """The prompt with its worked examples left out: each block from an `Example` (or
        `Example 2`) line to the blank line after it. Its version says so, and its messages
        differ, so its judgments are cached apart."""
        kept: list[str] = []
        skipping = False
        for line in self.system.splitlines():
            if _EXAMPLE_HEAD.match(line):
                skipping = True
            elif skipping and not line.strip():
                skipping = False
            elif not skipping:
                kept.append(line)
        return replace(self, version=f"{self.version}-no-examples", system="\n".join(kept))

    @functools.cached_property
    def _pieces(self) -> tuple[_Pieces, _Pieces]:
        """System and user text split at their variables: the text before the first, then
        each variable's name with the text after it."""
        return _split(self.system), _split(self.user)

    def render(self, **values: Any) -> list[dict[str, str]]:
        """Chat messages with every variable filled; a missing or unknown name is an error."""
        if values.keys() != self.variables:
            self._refuse(values)
        encoded = {name: data_json(value) for name, value in values.items()}
        (system, in_system), (user, in_user) = self._pieces
        # A section without variables is the same text, the same object, for every row.
        if in_system:
            system += "".join([encoded[name] + after for name, after in in_system])
        if in_user:
            user += "".join([encoded[name] + after for name, after in in_user])
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _refuse(self, values: dict[str, Any]) -> None:
        """The PromptError of values that miss or exceed the prompt's variables."""
        missing = self.variables - values.keys()
        extra = values.keys() - self.variables
        if missing or extra:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(sorted(missing))}")
            if extra:
                problems.append(f"not in the prompt: {', '.join(sorted(extra))}")
            raise PromptError(f"prompt {self.name!r}: {'; '.join(problems)}")


# A section's text before its first variable, then (name, text after it) per variable.
_Pieces = tuple[str, tuple[tuple[str, str], ...]]


def _split(text: str) -> _Pieces:
    pieces = _VARIABLE.split(text)  # [text, name, text, name, text]: names are the groups
    return pieces[0], tuple(zip(pieces[1::2], pieces[2::2], strict=True))


def reason_key(reason: str) -> str:
    """A reason compared with an example's: case, spacing and the final stop ignored."""
    return " ".join(reason.casefold().split()).rstrip(".。!！ ")


def _collect_reasons(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "reason" and isinstance(item, str):
                found.add(reason_key(item))
            else:
                _collect_reasons(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect_reasons(item, found)


def parse_prompt(text: str, name: str) -> Prompt:
    """Parse prompt text (the content of a prompt file)."""
    parts = _SECTION.split(text)
    # parts: [before, "system", body, "user", body]
    if len(parts) != 5 or parts[1] != "system" or parts[3] != "user" or parts[0].strip():
        raise PromptError(
            f"prompt {name!r} must be a <<<system>>> section followed by a <<<user>>> "
            "section, each marker on a line of its own"
        )
    return Prompt(
        name=name,
        version=sha256_hex(text)[:16],
        system=parts[2].strip("\n"),
        user=parts[4].strip("\n"),
    )


def load_prompt(name_or_path: str | os.PathLike[str]) -> Prompt:
    """A built-in prompt by name (`claims`), or a prompt file by path.

    The file is parsed again whenever it changes on disk, so an edited prompt gets a new
    version (and new cache keys) even in a long-running process.
    """
    path = _prompt_path(os.fspath(name_or_path))
    try:
        stat = os.stat(path)  # every judge call asks: a plain stat, no Path objects
    except OSError as exc:
        raise PromptError(f"cannot read prompt {str(name_or_path)!r}: {exc.strerror}") from exc
    return _load(path, stat.st_mtime_ns, stat.st_size)


def load_prompts(names: Iterable[str] = BUILTIN_PROMPTS) -> dict[str, Prompt]:
    """Prompts by name, read once: a run judges every row with the prompts it started with
    (their versions are in its fingerprint and summary), and a prompt edited meanwhile
    takes effect in the next run."""
    return {name: load_prompt(name) for name in names}


PROMPT_SET_MANIFEST = "prompt-set.json"  # what wrote a prompt set, beside its files


def load_prompt_set(folder: str | os.PathLike[str]) -> dict[str, Prompt]:
    """The built-in prompts, each replaced by the folder's file of its name (`verify.txt`).

    A prompt set is a folder of prompt files named after the built-in prompts they
    replace (`judge align` writes one); each file's version is its hash, as a built-in's
    is, so a run with the set has its own fingerprint and its own cache keys. Files that
    are not `.txt` (a `prompt-set.json` saying what wrote the set) are not read.

    Args:
        folder: the prompt set's folder.

    Raises:
        PromptError: the folder is missing or holds no prompt file, a file is named after
            no built-in prompt, or it does not use exactly the built-in's variables (the
            judge fills those and no others).
    """
    path = Path(folder)
    if not path.is_dir():
        raise PromptError(
            f"prompt set {str(folder)!r} is not a folder: give the folder of prompt files "
            "(as judge align writes it, e.g. aligned/prompts)"
        )
    files = sorted(path.glob("*.txt"))
    if not files:
        raise PromptError(
            f"prompt set {str(folder)!r} holds no prompt file: it needs files named after the "
            f"built-in prompts they replace ({', '.join(f'{n}.txt' for n in BUILTIN_PROMPTS)})"
        )
    prompts = load_prompts()
    for file in files:
        builtin = prompts.get(file.stem)
        if builtin is None:
            raise PromptError(
                f"prompt set {str(folder)!r}: {file.name} replaces no built-in prompt; name "
                f"it after one of {', '.join(f'{n}.txt' for n in BUILTIN_PROMPTS)}"
            )
        # Read whole, not through load_prompt's cache of (path, mtime, size): a file
        # rewritten with text of the same size within one tick of the file clock (a few
        # ms on Linux) would keep the old version, and the old set's cached judgments.
        prompt = _read_prompt_file(str(file))
        if prompt.variables != builtin.variables:
            raise PromptError(
                f"prompt set {str(folder)!r}: {file.name} must use exactly the variables the "
                f"{file.stem} judge fills ({', '.join(sorted(builtin.variables))}), not "
                f"{', '.join(sorted(prompt.variables)) or 'none'}"
            )
        prompts[file.stem] = prompt
    return prompts


def _prompt_path(name_or_path: str) -> str:
    """The file of a built-in prompt's name, or the path as given."""
    # The prompts' folder is looked up on each call (itself cached) so that pointing
    # prompts_dir elsewhere, as a test does, is seen.
    return _resolve_prompt_path(name_or_path, prompts_dir())


@functools.lru_cache(maxsize=256)
def _resolve_prompt_path(name_or_path: str, builtin: Path) -> str:
    path = Path(name_or_path)
    if path.suffix != ".txt" and path.parent == Path("."):
        path = builtin / f"{name_or_path}.txt"
    return str(path)


@functools.lru_cache(maxsize=256)
def _load(path: str, mtime_ns: int, size: int) -> Prompt:
    return _read_prompt_file(path)


def _read_prompt_file(path: str) -> Prompt:
    """The prompt file at path, read and parsed now."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"cannot read prompt {path!r}: {exc}") from exc
    return parse_prompt(text, Path(path).stem)
