"""The app contract: what `judge experiment --app TARGET` loads, and what the app returns.

An app takes the question (a string) as its one argument, or, when that argument is named
`row`, the test set's row (a dict: `id`, `question` and the test set's other columns,
`ground_truth`, `relevance` and any extra ones, under judge's field names); it returns a
mapping with `answer` (str), `contexts` (list of str, in the order the generator saw them)
and, optionally, `retrieved_ids` (list of str, in rank order), `retrieved_scores`
(numbers, one per id; numpy scalars and arrays, as a retriever such as FAISS returns them,
are read as the Python values they hold) and anything else JSON can hold (kept as extra
columns, under names that are not the test set's: `RESERVED`). It may be a function, a
coroutine function or a callable object; a pydantic model or a dataclass with those
fields is read like a mapping. Framework objects (a LangChain runnable, a LlamaIndex query
engine, a Haystack pipeline) go through `judge.experiments.adapters`.

A conversational app also takes the conversation so far, through a parameter named
`history` or `messages` (`CHAT_PARAMETERS`): beside the question, the messages before it
(`app(question, history)`, as Gradio's ChatInterface calls `fn(message, history)`); as its
one parameter, `messages`, the conversation ending with the question (`app(messages)`, as a
chat completion takes it). Each message is an OpenAI-style `{"role", "content"}` dict.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import math
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge.errors import JudgeError
from judge.experiments.adapters import adapt
from judge.run.data import APP_ERROR, COLUMNS

# The name of an app's parameter that asks for the test set's row, not the question.
ROW = "row"
# The names of a conversational app's parameter that is given the conversation so far.
CHAT_PARAMETERS = ("history", "messages")
# A conversational app's one parameter, given the conversation ending with the question.
MESSAGES = "messages"
# The columns an app's reply fills; every other key of the reply is kept as it is.
REPLY_FIELDS = ("answer", "contexts", "retrieved_ids", "retrieved_scores")
# Names an extra key of a reply may not take, with what judge reads under each: the test
# set's fields (a reply's "relevance", "reference" or "expected_tools" would be the labels
# the app is graded on), another name of retrieved_ids (judge eval would read it as the
# ranking), and the columns of the call's own record. Other names of the question, id,
# answer and contexts ("query", "response", ...) stay free: every output row has the
# columns read before them.
RESERVED: dict[str, str] = {
    "question": "judge's name for the question column",
    "id": "judge's name for the id column",
    **{
        name: f"judge's name for the {fld} column"
        # a conversation's turn: a reply making its row one, with a history it wrote,
        # had its claims "supported" by what it made the user say
        for fld in (
            "ground_truth",
            "relevance",
            "retrieved_ids",
            "history",
            "conversation_id",
            "turn",
        )
        for name in COLUMNS[fld].names
        if name not in REPLY_FIELDS
    },
    # the labels of the tool metrics, and a conversation turn's ground truth under
    # DeepEval's name: where the test set gave none, the app's own were read as them
    "expected_tools": "judge's name for the expected tool calls (the tool metrics' labels)",
    "expected_output": "DeepEval's name for a conversation turn's ground truth",
    APP_ERROR: "the column of the app's errors",
    "app_latency_s": "the column of the app's latency",
}


class AppError(JudgeError):
    """The app cannot be loaded or called (a bad target, an object that is not callable)."""


class MalformedReply(JudgeError):
    """The app returned something that is not a reply of the contract."""


@dataclass
class AppReply:
    """What an app returned for one question, checked against the contract."""

    answer: str
    contexts: list[str]
    retrieved_ids: list[str] | None = None
    retrieved_scores: list[float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """The reply as the columns of its app_outputs.jsonl row (extra keys after)."""
        row: dict[str, Any] = {"answer": self.answer, "contexts": self.contexts}
        if self.retrieved_ids is not None:
            row["retrieved_ids"] = self.retrieved_ids
        if self.retrieved_scores is not None:
            row["retrieved_scores"] = self.retrieved_scores
        return {**row, **self.extra}


@dataclass(frozen=True)
class Turn:
    """What a conversational app is given for one user message.

    Attributes:
        question: the user's message.
        history: the messages before it, OpenAI-style `{"role", "content"}` dicts, the
            app's own earlier answers among them.
    """

    question: str
    history: list[dict[str, str]]

    def messages(self) -> list[dict[str, str]]:
        """The conversation so far, ending with the question."""
        return [*self.history, {"role": "user", "content": self.question}]


@dataclass(frozen=True)
class App:
    """A loaded app: the callable to ask, and what identifies it in the run's records.

    Attributes:
        call: question (or the test set's row, see `takes_row`) -> reply (or an
            awaitable of one).
        target: how the user named it (`module:function`, `file.py:function`, or the
            object's qualified name when passed from Python).
        fingerprint: a hash of the source file the app was defined in (None when it has
            none, as for a builtin or an object made at the prompt).
        is_async: whether `call` returns an awaitable (a coroutine function or an object
            whose `__call__` is one).
        takes_row: whether `call` is given the test set's row (a dict; its one parameter
            is named `row`) rather than the question (a str).
        chat: for a conversational app (`call` then takes a `Turn`), what it is given:
            "question+history" or "question+messages" (the question, and the messages
            before it under that name), or "messages" (its one parameter: the
            conversation ending with the question); None for any other app.
    """

    call: Callable[[Any], Any]
    target: str
    fingerprint: str | None
    is_async: bool
    takes_row: bool = False
    chat: str | None = None

    @property
    def input(self) -> str:
        """What the app is given, as summary.json records it: "row", "question", or a
        conversational app's `chat`."""
        if self.chat is not None:
            return self.chat
        return ROW if self.takes_row else "question"


def load_target(target: str) -> Any:
    """The object a `module:attribute` or `path/to/file.py:attribute` target names
    (the attribute may be dotted: `module:pipeline.ask`). A module that cannot be
    imported (a syntax error, a file that is not UTF-8, an exception at import) is an
    `AppError` naming its file, line and error: the user's code, not judge's. The
    SIGINT and SIGTERM handlers are those from before the import, whatever it set."""
    # The user's Ctrl-C and a CI's cancel stop the run even when the app's module ignores
    # them (signal.SIG_IGN at import). Only its import can: calls run in other threads,
    # where signal.signal raises.
    kept = _signal_handlers()
    try:
        return _load_target(target)
    finally:
        for signum, handler in kept.items():
            if signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)


def _signal_handlers() -> dict[int, Any]:
    """This process's SIGINT and SIGTERM handlers (none outside the main thread, where
    they cannot be set, or a handler set outside Python, which cannot be put back)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    return {signum: handler for signum, handler in handlers.items() if handler is not None}


def _load_target(target: str) -> Any:
    where, sep, attribute = target.rpartition(":")
    if not sep or not where or not attribute:
        raise AppError(
            f"app={target!r}: give module:function or path/to/file.py:function "
            "(as uvicorn and gunicorn name an app)"
        )
    if where.endswith(".py") or "/" in where or "\\" in where:
        module = _module_from_file(Path(where), target)
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            if exc.name is not None and where.startswith(exc.name):
                raise AppError(
                    f"app={target!r}: no module named {where!r} (run from the folder "
                    "that holds it, set PYTHONPATH, or name its file: path/to/file.py:"
                    f"{attribute})"
                ) from None
            raise _import_failed(target, exc, None) from None
        except Exception as exc:  # SystemExit, KeyboardInterrupt: below
            raise _import_failed(target, exc, None) from None
        except SystemExit as exc:  # the module's sys.exit() at import
            raise _import_failed(target, exc, None) from None
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppError(f"app={target!r}: {where} has no attribute {attribute!r}") from None
    return obj


def _module_from_file(path: Path, target: str) -> Any:
    if not path.is_file():
        raise AppError(f"app={target!r}: {path}: no such file")
    name = f"judge_app_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AppError(f"app={target!r}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    # The file's own folder first while it runs, so it imports its sibling modules as
    # when run as a script; then last, so the siblings it imports when called are still
    # found, but a file there named as one of judge's dependencies (an openai.py) is not
    # taken for it by judge's own imports.
    folder = str(path.resolve().parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    before = set(sys.modules)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a real Ctrl-C (KeyboardInterrupt) stops judge
        del sys.modules[name]
        raise _import_failed(target, exc, path) from None
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        if added:
            sys.path.remove(folder)
            sys.path.append(folder)
    _check_shadows(target, folder, set(sys.modules) - before)
    return module


def _check_shadows(target: str, folder: str, imported: set[str]) -> None:
    """Refuse a module of the app's folder imported under the name of one of judge's
    dependencies (an openai.py the app imports): judge's own imports would get it."""
    mine = {
        name
        for name in imported
        if "." not in name
        and str(getattr(sys.modules.get(name), "__file__", None) or "").startswith(folder)
    }
    if not mine:
        return
    try:
        required = importlib.metadata.requires("judge") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return
    names = {re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0] for r in required if "extra ==" not in r}
    hidden = sorted(mine & {n.lower().replace("-", "_") for n in names})
    if hidden:
        file = sys.modules[hidden[0]].__file__
        raise AppError(
            f"app={target!r}: it imports {file} as {hidden[0]!r}, the name of a package "
            "judge uses, which judge would then import in its place: rename the file"
        )


def _import_failed(target: str, exc: BaseException, path: Path | None) -> AppError:
    """The error of an app whose module failed to import: its file, line and error."""
    if isinstance(exc, SyntaxError) and exc.filename:  # also a file that is not UTF-8
        where = f"{exc.filename}, line {exc.lineno}"
        error = f"SyntaxError: {exc.msg}"
    else:
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")
        ]
        # The deepest frame of the app's own folder, else the deepest one of all.
        folder = str(path.resolve().parent) if path is not None else None
        own = [f for f in frames if folder is not None and f.filename.startswith(folder)]
        shown = own or frames
        where = f"{shown[-1].filename}, line {shown[-1].lineno}" if shown else str(path)
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return AppError(f"app={target!r}: cannot import the app: {where}: {error}")


def as_app(obj: Any, target: str | None = None) -> App:
    """The `App` of a loaded object: a framework object through its adapter, else the
    object itself when it can be called with the question.

    Args:
        obj: a function, coroutine function, callable object or framework object.
        target: how the user named it (default: the object's qualified name).
    """
    name = target or _qualified_name(obj)
    call = adapt(obj)
    if call is not None:  # the framework's classes say nothing of the user's pipeline
        fingerprint = _file_hash(_target_file(target)) if target else None
        chat = _chat_parameter(call, name)
        if chat is not None:
            return App(_chat_call(call, chat), name, fingerprint, _is_async(call), chat=chat)
        return App(call, name, fingerprint, _is_async(call))
    if not callable(obj):
        raise AppError(
            f"app {name}: a {type(obj).__name__} is not callable; give a function "
            "(question -> {'answer': ..., 'contexts': [...]}), a callable object, a "
            "LangChain runnable, a LlamaIndex query engine or a Haystack pipeline"
        )
    chat = _chat_parameter(obj, name)
    if chat is not None:
        return App(_chat_call(obj, chat), name, _fingerprint(obj), _is_async(obj), chat=chat)
    takes_row = _check_signature(obj, name)
    return App(obj, name, _fingerprint(obj), _is_async(obj), takes_row)


def _chat_parameter(obj: Any, name: str) -> str | None:
    """What a conversational app is given (`App.chat`), or None for an app that takes no
    `history` or `messages` parameter; refused when the app cannot be called so."""
    try:
        parameters = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: not conversational
        return None
    found = next(
        (
            p
            for p in parameters
            if p.name in CHAT_PARAMETERS and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ),
        None,
    )
    if found is None:
        return None
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [
        p
        for p in parameters
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    signature = f"app {name}{inspect.signature(obj)}"
    if positional and positional[0] is found:  # the conversation is its first parameter
        if found.name != MESSAGES or any(p is not found for p in required):
            raise AppError(
                f"{signature}: its first parameter, {found.name!r}, would be given the "
                "conversation: take the question first and the messages before it "
                "after, app(question, history), or take the conversation ending with "
                "the question as the one parameter, app(messages)"
            )
        return MESSAGES
    if found.kind == found.POSITIONAL_ONLY:
        raise AppError(
            f"{signature}: {found.name!r} is positional-only: judge passes the conversation "
            f"by name ({found.name}=[...]); drop the '/' before it"
        )
    if not positional or any(p is not positional[0] and p is not found for p in required):
        raise AppError(
            f"{signature}: a conversational app takes the question (a str) and "
            f"{found.name!r}, the messages before it; other parameters need defaults"
        )
    if positional[0].name == ROW:
        raise AppError(
            f"{signature}: an app given the conversation is given the question, not the "
            f"test set's row: rename {ROW!r} (e.g. question)"
        )
    return f"question+{found.name}"


def _chat_call(obj: Any, chat: str) -> Callable[[Turn], Any]:
    """The app called with a `Turn`: the question and the messages before it under the
    parameter's name, or the conversation ending with the question alone."""
    if chat == MESSAGES:
        return lambda turn: obj(turn.messages())
    parameter = chat.partition("+")[2]
    return lambda turn: obj(turn.question, **{parameter: turn.history})


def _target_file(target: str) -> Path | None:
    """The source file of a target's module (`file.py:obj` or `module:obj`), if any."""
    where = target.rpartition(":")[0]
    if where.endswith(".py") or "/" in where or "\\" in where:
        return Path(where)
    module = sys.modules.get(where)
    file = getattr(module, "__file__", None)
    return Path(file) if file else None


def _file_hash(path: Path | None) -> str | None:
    if path is None or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_signature(obj: Any, name: str) -> bool:
    """Whether the app takes the test set's row (its one argument is named `row`) rather
    than the question; fails before the first call when it cannot take one positional
    argument, or when its argument is typed as the other form."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin without a signature: the call will tell
        return False
    try:
        signature.bind("question")
    except TypeError:
        raise AppError(
            f"app {name}{signature}: it must take one argument: the question (a str), or "
            f"the test set's row (a dict) when that argument is named {ROW!r}"
        ) from None
    first = next(iter(signature.parameters.values()), None)
    if first is None or first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD):
        return False  # *args: given the question
    kind = _annotated_kind(first.annotation)
    if first.name == ROW and kind == "str":
        raise AppError(
            f"app {name}{signature}: an argument named {ROW!r} is given the test set's row "
            "(a dict), but it is annotated str: rename it (e.g. question) to be given the "
            "question, or annotate it dict"
        )
    if first.name != ROW and kind == "mapping":
        raise AppError(
            f"app {name}{signature}: its argument is annotated as a mapping, but judge gives "
            f"it the question (a str): name it {ROW!r} to be given the test set's row (a "
            "dict), or annotate it str"
        )
    return first.name == ROW


def _annotated_kind(annotation: Any) -> str | None:
    """Which of the two forms an argument is annotated as: "str", "mapping" (also when
    the annotation is a string, under `from __future__ import annotations`), or None."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):
        text = annotation.replace(" ", "").rsplit(".", 1)[-1]
        if text == "str":
            return "str"
        head = text.split("[", 1)[0]
        return "mapping" if head in {"dict", "Dict", "Mapping", "MutableMapping"} else None
    if annotation is str:
        return "str"
    origin = getattr(annotation, "__origin__", annotation)
    return "mapping" if isinstance(origin, type) and issubclass(origin, Mapping) else None


def _is_async(call: Any) -> bool:
    if inspect.iscoroutinefunction(call):
        return True
    # A callable object: its class's __call__ (the instance's own attribute is not used).
    return inspect.iscoroutinefunction(type(call).__call__)


def _qualified_name(obj: Any) -> str:
    target = obj if inspect.isroutine(obj) or inspect.isclass(obj) else type(obj)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}:{getattr(target, '__qualname__', type(obj).__name__)}"


def _fingerprint(obj: Any) -> str | None:
    """A hash of the source file that defines the app (its class for an object)."""
    target = obj if inspect.isroutine(obj) or inspect.isclass(obj) else type(obj)
    try:
        file = inspect.getsourcefile(target)
    except TypeError:  # builtins have no source file
        return None
    return _file_hash(Path(file)) if file is not None else None


def parse_reply(value: Any, inputs: Collection[str] = ()) -> AppReply:
    """The app's return value checked against the contract; `MalformedReply` says what
    is wrong in the app's terms.

    Args:
        value: what the app returned.
        inputs: the columns of the question's row (the test set's): an extra key of the
            reply may not name one, nor a name in `RESERVED`.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif hasattr(value, "model_dump") and callable(value.model_dump):  # a pydantic model
        value = value.model_dump(mode="json")
    if not isinstance(value, Mapping):
        raise MalformedReply(
            f"returned a {type(value).__name__}, not a mapping with 'answer' and 'contexts'"
        )
    missing = [key for key in ("answer", "contexts") if key not in value]
    if missing:
        raise MalformedReply(
            f"the reply has no {' and no '.join(repr(k) for k in missing)} "
            f"(its keys: {', '.join(map(str, value)) or 'none'})"
        )
    answer = value["answer"]
    if not isinstance(answer, str):
        raise MalformedReply(f"'answer' is a {type(answer).__name__}, not a string")
    contexts = _strings(value["contexts"], "contexts")
    ids = value.get("retrieved_ids")
    scores = value.get("retrieved_scores")
    retrieved_ids = None if ids is None else _ids(ids)
    retrieved_scores = None if scores is None else _scores(scores)
    if retrieved_scores is not None and (
        retrieved_ids is None or len(retrieved_scores) != len(retrieved_ids)
    ):
        count = "no retrieved_ids" if retrieved_ids is None else f"{len(retrieved_ids)} ids"
        raise MalformedReply(
            f"'retrieved_scores' has {len(retrieved_scores)} scores for {count}: give "
            "one score per retrieved id"
        )
    extra = {k: v for k, v in value.items() if k not in REPLY_FIELDS}
    for key, item in extra.items():
        if not isinstance(key, str):
            raise MalformedReply(f"the reply's key {key!r} is not a string")
        taken = "a column of the test set" if key in inputs else RESERVED.get(key)
        if taken is not None:  # the app would replace its input, or grade itself
            raise MalformedReply(
                f"the reply's key {key!r} is {taken}: an app's extra keys may not replace "
                "the test set's columns; rename it"
            )
        try:  # kept as JSON reads it back: plain values, whatever the app's classes do
            extra[key] = json.loads(json.dumps(item, allow_nan=False))
        except (TypeError, ValueError):
            raise MalformedReply(
                f"the reply's {key!r} ({type(item).__name__}) cannot be written as JSON"
            ) from None
        except RecursionError:  # lists in lists past Python's limit
            raise MalformedReply(
                f"the reply's {key!r} is nested too deeply to be written as JSON"
            ) from None
    return AppReply(answer, contexts, retrieved_ids, retrieved_scores, extra)


def _strings(value: Any, key: str) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise MalformedReply(f"{key!r} is a {type(value).__name__}, not a list of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise MalformedReply(f"{key}[{i}] is a {type(item).__name__}, not a string")
    return list(value)


def _plain(value: Any) -> Any:
    """A numpy value as the Python one it holds (an array as a list, a scalar as an int,
    float, str or bool): what a retriever such as FAISS returns; anything else as it is."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    return value


def _ids(value: Any) -> list[str]:
    value = _plain(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise MalformedReply(
            f"'retrieved_ids' is a {type(value).__name__}, not a list of ids in rank order"
        )
    ids = []
    for i, item in enumerate(value):
        item = _plain(item)
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise MalformedReply(
                f"retrieved_ids[{i}] is a {type(item).__name__}, not a string (or integer)"
            )
        try:
            ids.append(str(item))
        except ValueError:  # an int past Python's limit of digits in a str
            raise MalformedReply(f"retrieved_ids[{i}] is an integer too long for an id") from None
    return ids


def _scores(value: Any) -> list[float]:
    value = _plain(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise MalformedReply(f"'retrieved_scores' is a {type(value).__name__}, not a list")
    scores = []
    for i, item in enumerate(value):
        item = _plain(item)
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise MalformedReply(f"retrieved_scores[{i}] is a {type(item).__name__}, not a number")
        try:
            score = float(item)
        except OverflowError:  # an int past the largest float
            raise MalformedReply(f"retrieved_scores[{i}] is too large for a number") from None
        if not math.isfinite(score):
            raise MalformedReply(f"retrieved_scores[{i}] is {score}, not a finite number")
        scores.append(score)
    return scores
