"""`judge.experiments`: the user's app asked every question of a test set, its outputs
kept, then judged as `judge eval` judges a file.

The output folder gets `app_outputs.jsonl` (one row per question: the test set's columns,
the app's answer, contexts, retrieved ids and scores, extra keys, latency and error; a
valid `judge eval` input, so judging again never asks the app again), `run.trec` and
`qrels.txt` when the app returns retrieved ids and the test set has relevance labels
(for `judge ir` and `judge compare --qrels`), and the files of `judge eval`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from judge.aio import sync_twin
from judge.cache.store import Cache
from judge.conversations import CONVERSATION_KEYS, conversation_rows, is_conversation
from judge.errors import CacheStoreError, InputFormatError, JudgeError, LLMConfigError
from judge.experiments.app import REPLY_FIELDS, App, AppError, as_app, load_target
from judge.experiments.calls import ERROR, CallStats, ProgressFile, Question, ask_all
from judge.experiments.chats import Chat, play_all, played, read_chats, stand_in_lines
from judge.ir import DEFAULT_METRICS
from judge.ir.trec import read_qrels, write_qrels, write_run
from judge.json_values import nan_to_null
from judge.llm.config import LLM, Embeddings
from judge.llm.session import LLMSession
from judge.llm.transport import check_config, check_server
from judge.metrics.resolve import MetricLike
from judge.run.data import (
    JsonlRecords,
    LazySequence,
    Row,
    build_rows,
    load_rows_lazily,
    parse_relevance,
    read_records,
    resolve_columns,
)
from judge.run.dry_run import acheck_scorable
from judge.run.evaluate import aevaluate_rows
from judge.run.folder import (
    APP_OUTPUTS,
    APP_PROGRESS,
    CHECKPOINT,
    QRELS,
    RUN_TREC,
    record_written,
)
from judge.run.gates import Bound, Gates, as_gates
from judge.run.inputs import open_input
from judge.run.options import RunSpec
from judge.run.output_folder import OutputFolder
from judge.run.outputs import write_outputs
from judge.run.plan import plan_run
from judge.run.progress import DEFAULT_INTERVAL
from judge.run.results import EvaluationResult

PROGRESS_FILE = APP_PROGRESS  # the calls finished so far, for a resumed run
TESTSET_FILE = "testset.jsonl"  # a `judge testset build` folder holds it, with qrels.txt
DEFAULT_APP_CONCURRENCY = 8
DEFAULT_APP_TIMEOUT = 120.0
DEFAULT_OUT = "judge-experiment"


T = TypeVar("T")
V = TypeVar("V")


@dataclasses.dataclass(frozen=True)
class TestSet:
    """The questions to ask, where they came from, and their relevance labels.

    Attributes:
        questions: the questions, in the test set's order; built from their records when
            used (from a JSON-lines file, from its lines: memory holds an offset each).
        source: where the questions came from.
        qrels_source: where the relevance labels come from; None when there are none.
        labels: a qrels file's labels (None when they come from the relevance column,
            read when `qrels` is used); for conversations, the turns' labels by turn id.
        chats: the test set's conversations, when it holds conversations rather than
            questions (`questions` is then empty): `judge.experiments.chats`.
    """

    __test__ = False  # not a pytest test class, despite the name

    questions: Sequence[Question]
    source: str
    qrels_source: str | None
    labels: Mapping[str, Mapping[str, int]] | None = None
    chats: Sequence[Chat] | None = None

    def files(self) -> list[str]:
        """The files the test set is read from (its questions, its qrels): no output of
        the experiment may replace them."""
        named = (self.source, self.qrels_source)
        return [p for p in named if p is not None and os.path.isfile(p)]

    def qrels(self) -> Mapping[str, Mapping[str, int]] | None:
        """The relevance labels by question id (None: there are none); those of a relevance
        column are read from the questions when used, a later row winning for an id."""
        if self.qrels_source is None or self.labels is not None:
            return self.labels
        return _ParsedByID(self.questions, lambda q: q.id, _labels)


class _ParsedByID(Mapping[str, V], Generic[T, V]):
    """Values by id, each parsed from its item when used (the relevance column's labels
    of the questions, the app's rankings of its rows): memory holds a position per id, a
    later item of an id winning; items that parse to None are left out."""

    def __init__(
        self, items: Sequence[T], ident: Callable[[T], str], parse: Callable[[T], V | None]
    ):
        self._items = items
        self._parse = parse
        self._where: dict[str, int] = {}
        for i, item in enumerate(items):
            if parse(item) is not None:
                self._where[ident(item)] = i

    def __getitem__(self, ident: str) -> V:
        value = self._parse(self._items[self._where[ident]])
        assert value is not None  # checked when the id was placed
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def _labels(question: Question) -> dict[str, int] | None:
    """A question's relevance column as labels; None when it has none or they cannot be
    read (judge eval says so for that row)."""
    value = question.columns.get("relevance")
    if value is None:
        return None
    try:
        return parse_relevance(value)
    except (ValueError, TypeError):
        return None


class _Questions(LazySequence[Question]):
    """A test set's questions, each built from its record when used."""

    def __init__(
        self,
        records: Sequence[Mapping[str, Any]],
        make: Callable[[int, Mapping[str, Any]], Question],
    ):
        self._records = records
        self._make = make

    def __len__(self) -> int:
        return len(self._records)

    def at(self, number: int) -> Question:
        """Question `number`, built from its record."""
        return self._make(number, self._records[number])

    def __iter__(self) -> Iterator[Question]:
        for number, record in enumerate(self._records):
            yield self._make(number, record)


def _records(data: Any) -> tuple[Sequence[dict[str, Any]], str, Sequence[str]]:
    """A test set's records (a JSON-lines file's read from it when used), where they came
    from, and their column names."""
    path = Path(data) if isinstance(data, (str, os.PathLike)) else None
    if path is not None and path.suffix.lower() == ".jsonl" and path.is_file():
        # Read by its absolute path: the app may change the working directory meanwhile.
        records = JsonlRecords.scan(path.absolute())
        return records, str(path), records.names
    loaded, source = read_records(data)
    return loaded, source, list(dict.fromkeys(k for r in loaded for k in r))


def load_testset(
    data: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    qrels: str | os.PathLike[str] | None = None,
) -> TestSet:
    """The questions of a test set: a `judge testset build` folder (its testset.jsonl,
    with qrels.txt as relevance labels), or anything `judge.evaluate` reads. A JSON-lines
    test set is read from its file as the questions are asked, never held whole.

    Args:
        data: the test set.
        column_map: `{field: column}` for question, id, ground_truth and relevance
            columns with other names.
        qrels: a TREC qrels file whose labels replace the test set's `relevance`
            column (default: a test set folder's qrels.txt).
    """
    folder = Path(data) if isinstance(data, (str, os.PathLike)) else None
    if folder is not None and folder.is_dir() and (folder / TESTSET_FILE).is_file():
        records, source, names = _records(folder / TESTSET_FILE)
        if qrels is None and (folder / "qrels.txt").is_file():
            qrels = folder / "qrels.txt"
    else:
        records, source, names = _records(data)
    if not records:
        raise InputFormatError(f"{source}: no questions to ask")
    if any(k in names for k in CONVERSATION_KEYS) and is_conversation(records[0]):
        return _conversations(records, source, column_map, qrels)
    columns = resolve_columns(names, column_map, source)
    labels = read_qrels(qrels) if qrels is not None else None
    # The app fills these; a test set's own (a reference answer under "answer") would
    # be taken for the app's.
    dropped = {columns.get(f) for f in ("answer", "contexts", "retrieved_ids")} | set(REPLY_FIELDS)
    renamed = {col: fld for fld, col in columns.items()}

    def question(number: int, record: Mapping[str, Any]) -> Question:
        text = record.get(columns["question"])
        text = text if isinstance(text, str) else ""  # checked below
        ident = record.get(columns["id"]) if "id" in columns else None
        ident = number if ident is None else ident
        row: dict[str, Any] = {"id": ident, "question": text}
        for column, value in record.items():
            if column in dropped or column in (ERROR, "app_latency_s"):
                continue
            name = renamed.get(column, column)
            if name not in row:  # a NaN cell is a missing one, as `judge eval` reads it
                row[name] = nan_to_null(value)
        if labels is not None:
            row.pop("relevance", None)
            if str(ident) in labels:
                row["relevance"] = labels[str(ident)]
        return Question(number, str(ident), text, row)

    questions = _Questions(records, question)
    bad = []
    found = False  # labels in the relevance column
    # Each id's first row, and whether its id is its row number (it had none): every row
    # has its own line in run.trec and qrels.txt, so no two may share an id as text.
    ids: dict[str, tuple[int, bool]] = {}
    for number, record in enumerate(records):  # one pass, one record at a time
        text = record.get(columns["question"])
        if not isinstance(text, str) or not text.strip():
            bad.append(number)
        elif labels is None and not found:
            found = _labels(question(number, record)) is not None
        given = record.get(columns["id"]) if "id" in columns else None
        _check_finite(source, number, record, columns.get("id", "id"))
        first, numbered = ids.setdefault(
            str(number if given is None else given), (number, given is None)
        )
        if first != number:
            raise _same_id(source, first, numbered, number, given, columns.get("id", "id"))
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (", ..." if len(bad) > 5 else "")
        raise InputFormatError(
            f"{source}: {len(bad)} rows have no question to ask (rows {shown}); fix them or "
            "map the question column with column_map={'question': ...}"
        )
    if labels is None and found:
        return TestSet(questions, source, f"{source} (relevance column)")
    return TestSet(questions, source, os.fspath(qrels) if qrels is not None else None, labels)


def _conversations(
    records: Sequence[Mapping[str, Any]],
    source: str,
    column_map: Mapping[str, str] | None,
    qrels: str | os.PathLike[str] | None,
) -> TestSet:
    """A test set of conversations, each played turn by turn: its turns' relevance labels
    are those of its assistant messages."""
    if column_map:
        raise InputFormatError(
            f"{source} holds conversations, whose fields have fixed names (see the "
            "conversations guide): column_map (--column) applies to a test set of questions"
        )
    if qrels is not None:
        raise InputFormatError(
            f"{source} holds conversations: give each turn's relevance labels on its "
            "assistant message ('relevance'), not in a qrels file (qrels=, --qrels)"
        )
    chats = read_chats(records, source)
    for chat in chats:
        _check_finite(source, chat.number, chat.fields, "id")
        for message in chat.messages:
            _check_finite(source, chat.number, message, "id")
    labels = {
        chat.turn_id(position): parsed
        for chat in chats
        for position in chat.slots
        if (parsed := _labels(Question(0, "", "", chat.messages[position - 1]))) is not None
    }
    where = f"{source} (relevance of the assistant turns)" if labels else None
    return TestSet((), source, where, labels if labels else None, chats)


def _check_finite(source: str, number: int, record: Mapping[str, Any], id_column: str) -> None:
    """Refuse an infinity in a record (JSON has none to write it as; json.loads reads
    Infinity and 1e400 as one), and a NaN id (every NaN is 'nan' as text)."""
    for column, value in record.items():
        if column == id_column and isinstance(value, float) and not math.isfinite(value):
            raise InputFormatError(
                f"{source}: row {number}: its {column!r} is {value}, not an id: give it a "
                "text or a whole number"
            )
        if _infinite(value):
            raise InputFormatError(
                f"{source}: row {number}, column {column!r}: an infinite number (Infinity, "
                "or a number too large for a float such as 1e400) cannot be written as "
                "JSON: give a finite number or null"
            )


def _infinite(value: Any) -> bool:
    """Whether a JSON value holds an infinite float, at any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if math.isinf(item):
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def _same_id(
    source: str, first: int, numbered: bool, number: int, given: Any, column: str
) -> InputFormatError:
    """The error of two rows with one id (as text); a row without one has its number."""
    ident = str(number if given is None else given)
    why = [
        f"row {n} has no {column} and is given its row number"
        for n, none in ((first, numbered), (number, given is None))
        if none
    ]
    return InputFormatError(
        f"{source}: rows {first} and {number} have the same id {ident!r}"
        + (f" ({'; '.join(why)})" if why else "")
        + f": ids must be unique (compared as text); give each row its own {column}"
    )


def _ranked(row: Mapping[str, Any]) -> dict[str, float] | None:
    """A row's retrieved ids with scores falling in rank order; None without any."""
    ids = row.get("retrieved_ids")
    if row.get(ERROR) is not None or not ids:
        return None
    ranked = list(dict.fromkeys(ids))  # a document twice counts at its first rank
    return {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}


def trec_run(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Mapping[str, float]]:
    """The app's rankings as a TREC run: per question id, its retrieved ids with scores
    falling in rank order (the app's own scores stay in app_outputs.jsonl: trec_eval
    ranks by score, and an app's scores may be distances, or not follow its order).
    Each question's ranking is made from its row when used (`rows` may read each from
    its file): memory holds a position per question id."""
    return _ParsedByID(rows, lambda row: str(row["id"]), _ranked)


def _write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")


async def run_experiment(
    app: App,
    testset: TestSet,
    folder: OutputFolder,
    spec: RunSpec,
    *,
    app_concurrency: int = DEFAULT_APP_CONCURRENCY,
    app_timeout: float = DEFAULT_APP_TIMEOUT,
) -> EvaluationResult:
    """Ask the app, write its outputs into the (open) folder, judge them as the spec says
    (its checkpoint is the folder's); the judged folder's results.jsonl, summary.json and
    report.html are the caller's to write."""
    # With relevance labels the rows' ids are written to run.trec and qrels.txt.
    trec = testset.qrels_source is not None
    progress_file = ProgressFile(folder.path / PROGRESS_FILE, app, trec=trec)
    if testset.chats is not None:
        return await _run_chats(
            app, testset, folder, spec, progress_file, app_concurrency, app_timeout
        )
    rows, stats = await ask_all(
        app,
        testset.questions,
        progress_file,
        concurrency=app_concurrency,
        timeout=app_timeout,
        progress=spec.progress,
        progress_interval=spec.progress_interval,
    )
    published = [APP_OUTPUTS]
    with folder.writing(APP_OUTPUTS) as outputs:
        _write_jsonl(outputs, rows)
    # The rows as judge eval reads them (below): qrels.txt holds the labels it scores.
    published += write_rankings(folder, testset, rows, load_rows_lazily(outputs)[0])
    folder.publish(published)  # kept whatever happens to the judging
    # Judged as `judge eval` judges the file, its rows read from it as they are judged.
    loaded, columns, source = load_rows_lazily(folder.path / APP_OUTPUTS)
    if testset.qrels_source is not None and sum(stats.errors.values()) == len(rows):
        # The app failed on every question, so no row has its columns: the retrieval
        # metrics are still the run's, every row failing with its app error (counted,
        # and gated by max_error_rate), not refused for a column no row could have.
        columns = {**columns, "retrieved_ids": "retrieved_ids"}
    judged = dataclasses.replace(spec, checkpoint=folder.path / CHECKPOINT)
    result = await aevaluate_rows(loaded, columns, source, judged)
    result.config = dataclasses.replace(
        result.config,
        source=APP_OUTPUTS,  # in the folder: its bytes are the same wherever the folder is
        app=app_record(app, stats, testset, app_concurrency, app_timeout),
    )
    return result


async def _run_chats(
    app: App,
    testset: TestSet,
    folder: OutputFolder,
    spec: RunSpec,
    progress_file: ProgressFile,
    app_concurrency: int,
    app_timeout: float,
) -> EvaluationResult:
    """`run_experiment` of a test set of conversations: each played turn by turn, written
    as conversations, judged through the conversation reader (a row per assistant turn)."""
    assert testset.chats is not None
    offsets, stats = await play_all(
        app,
        testset.chats,
        progress_file,
        concurrency=app_concurrency,
        timeout=app_timeout,
        progress=spec.progress,
        progress_interval=spec.progress_interval,
    )
    published = [APP_OUTPUTS]
    with folder.writing(APP_OUTPUTS) as outputs:
        _write_jsonl(outputs, played(testset.chats, progress_file, offsets, stats))
    # Each turn a row, as judge eval reads the file; held whole for the rankings alone.
    turns = [row for _, row in conversation_rows(enumerate(JsonlRecords.scan(outputs)))]
    if testset.qrels_source is not None:
        columns = resolve_columns(dict.fromkeys(k for r in turns for k in r), None)
        published += write_rankings(folder, testset, turns, build_rows(turns, columns))
    folder.publish(published)  # kept whatever happens to the judging
    loaded = open_input(folder.path / APP_OUTPUTS)
    columns = loaded.columns
    if testset.qrels_source is not None and sum(stats.errors.values()) == len(turns):
        columns = {**columns, "retrieved_ids": "retrieved_ids"}  # as for questions, above
    judged = dataclasses.replace(spec, checkpoint=folder.path / CHECKPOINT)
    result = await aevaluate_rows(loaded, columns, loaded.source, judged)
    record = app_record(app, stats, testset, app_concurrency, app_timeout)
    # Every turn, also those not played after a failure (asked + reused counts the calls).
    record["questions"] = sum(len(chat.slots) for chat in testset.chats)
    record["conversations"] = len(testset.chats)
    result.config = dataclasses.replace(result.config, source=APP_OUTPUTS, app=record)
    return result


# What the app's reply stands in as when the test set is checked before the app is asked.
_STAND_IN = {
    "answer": "The app's answer.",
    "contexts": ["A context the app retrieved."],
}


async def check_testset(testset: TestSet, spec: RunSpec) -> None:
    """Refuse, before the app is asked (and the judge paid), metrics that the test set
    cannot feed, and gates naming a metric the run does not compute: each question is
    judged as the app's output would be, with a stand-in answer, contexts and ranking and
    stand-in replies of the judge (no request), until every metric scored one.

    Raises:
        judge.errors.InputFormatError: the metrics that would score no row, the column
            they need (ground_truth, relevance labels...) and how to leave them out.
        judge.errors.JudgeError: a gate names a metric the run does not compute.
    """
    trec = testset.qrels_source is not None
    reply = {**_STAND_IN, "retrieved_ids": ["stand-in"]} if trec else _STAND_IN
    rows: Sequence[Row]
    if testset.chats is not None:
        turns = [r for _, r in conversation_rows(enumerate(stand_in_lines(testset.chats, reply)))]
        columns = resolve_columns(dict.fromkeys(k for r in turns for k in r), None)
        rows = build_rows(turns, columns)
    else:
        names = dict.fromkeys(k for question in testset.questions for k in question.columns)
        columns = resolve_columns([*names, *reply], None)
        rows = _StandInRows(testset.questions, columns, reply)
    chat, embedder = spec.models()
    plan, _ = plan_run(
        None,
        columns,
        testset.source,
        metrics=spec.metrics,
        llm=chat,
        embeddings=embedder,
        gates=spec.gates,
    )
    await acheck_scorable(plan, rows)


class _StandInRows(LazySequence[Row]):
    """The test set's rows as the app's outputs would make them, each built when used
    (a JSON-lines test set is never held whole)."""

    def __init__(
        self, questions: Sequence[Question], columns: Mapping[str, str], reply: Mapping[str, Any]
    ):
        self._questions = questions
        self._columns = columns
        self._reply = reply

    def __len__(self) -> int:
        return len(self._questions)

    def at(self, number: int) -> Row:
        question = self._questions[number]
        record = {**question.columns, **self._reply}
        return build_rows([record], self._columns, [question.number])[0]


async def check_judge(spec: RunSpec) -> None:
    """Refuse, before the app is asked, a judge whose every request would fail for want
    of a key, a route or a server: no API key, a model litellm cannot route, an
    OpenAI-compatible server that cannot be reached or refuses the key (one request,
    none in a replay from the cache): `LLMConfigError`, as the first judging request
    would raise it after the app answered every question."""
    chat, embedder = spec.models()
    if chat is not None:
        check_config(chat, "model={!r}")
    if embedder is not None:
        check_config(embedder, "Embeddings(model={!r})")
    store = spec.llm.cache if isinstance(spec.llm, LLMSession) else spec.cache
    if chat is not None and not (isinstance(store, Cache) and store.mode == "replay"):
        await check_server(chat)


def write_rankings(
    folder: OutputFolder,
    testset: TestSet,
    rows: Sequence[Mapping[str, Any]],
    judged: Sequence[Row],
) -> list[str]:
    """run.trec and qrels.txt, written into the folder when the app returned retrieved ids
    and the test set has relevance labels; the names of the files written.

    qrels.txt holds the labels of the questions the summary's retrieval metrics average
    over, and no others: those with labels that judge eval scores (`judged`, the rows
    read back from app_outputs.jsonl), not a question the app failed on, nor a label of
    an id the test set does not have. `judge ir` (trec_eval -c: a judged query without a
    ranking scores 0) on the two files gives the summary's figures: a question answered
    without retrieved ids scores 0 in both.
    """
    if testset.qrels() is None:
        return []
    run = trec_run(rows)
    if not run:
        return []
    labels = _ParsedByID(
        range(len(judged)), lambda i: str(rows[i]["id"]), lambda i: _scored(judged[i])
    )
    if not labels:
        return []  # no question the app answered has labels: nothing to score
    with folder.writing(RUN_TREC) as path:
        write_run(run, path, tag="app")
    with folder.writing(QRELS) as path:
        write_qrels(labels, path)
    return [RUN_TREC, QRELS]


def _scored(row: Row) -> dict[str, int] | None:
    """A row's labels, when judge eval scores its retrieval metrics: a row it reads (the
    app answered) with at least one label; else None."""
    if row.sample is None or row.error is not None or not row.relevance:
        return None
    return row.relevance


def app_record(
    app: App, stats: CallStats, testset: TestSet, concurrency: int, timeout: float
) -> dict[str, Any]:
    """summary.json's `config.app`: which app, how it was called, what the calls gave."""
    return {
        "target": app.target,
        "fingerprint": app.fingerprint,
        "input": app.input,
        "testset": testset.source,
        "qrels": testset.qrels_source,
        "concurrency": concurrency,
        "timeout_s": timeout,
        **stats.as_json(),
    }


def finished(folder: Path) -> None:
    """Remove what only a resumed experiment needs, once its outputs are written."""
    for name in (PROGRESS_FILE, CHECKPOINT):
        (folder / name).unlink(missing_ok=True)


async def aexperiment(
    app: Any,
    data: Any,
    *,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    metrics: Sequence[MetricLike] | None = None,
    llm: LLM | LLMSession | None = None,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    column_map: Mapping[str, str] | None = None,
    qrels: str | os.PathLike[str] | None = None,
    app_concurrency: int = DEFAULT_APP_CONCURRENCY,
    app_timeout: float = DEFAULT_APP_TIMEOUT,
    concurrency: int | None = None,
    progress: bool = True,
    progress_interval: float = DEFAULT_INTERVAL,
    gates: Gates | Iterable[str | Bound] | None = None,
    record: bool = True,
    write: Callable[[EvaluationResult, OutputFolder], object] | None = None,
) -> EvaluationResult:
    """Run the user's RAG app on every question of a test set, keep its outputs, judge them.

    Args:
        app: a function, coroutine function or callable object taking the question (a
            str), or the test set's row (a dict: id, question, ground_truth, relevance
            and any other column) when its one parameter is named `row`, and returning
            `{"answer": str, "contexts": [str, ...]}`, optionally with
            `retrieved_ids` (rank order), `retrieved_scores` and extra keys (a key
            naming a test set column is that question's app error); a conversational
            app, taking the question and the messages before it through a parameter
            named `history` (or `messages`), or the conversation ending with the
            question as its one parameter `messages`; a LangChain runnable, LlamaIndex
            query engine or chat engine; or a target string `"module:function"` /
            `"path/to/file.py:function"`.
        data: the test set: a `judge testset build` folder, or anything `judge.evaluate`
            reads (needs a question column; id, ground_truth and relevance are used;
            ids unique as text, a row without one having its row number); or
            conversations, one per record (`judge.experiments.chats`): each user
            message asked of a conversational app in order, the outputs written as
            conversations and judged a row per assistant turn.
        out: the folder written: app_outputs.jsonl, run.trec and qrels.txt (with
            retrieved ids and relevance labels), results.jsonl, summary.json,
            report.html. A stopped experiment rerun with the same `out` and app resumes:
            answered questions are not asked again (unless what the app is given
            changed), judged rows not judged again; the rows are built from the test set
            as it is now.
        metrics, llm, embeddings, cache, concurrency: as for `judge.evaluate`; without
            `llm` only retrieval metrics can be computed.
        column_map: `{field: column}` for test set columns with other names.
        qrels: a TREC qrels file of relevance labels by question id (default: the test
            set folder's qrels.txt, else its relevance column).
        app_concurrency: app calls in flight at once (the judge's are `concurrency`).
        app_timeout: seconds one app call may take; a slower call is that question's
            app error (a sync app's thread is left to finish on its own).
        progress, progress_interval: as for `judge.evaluate`.
        gates: the gates the run will be held to (strings such as
            `["faithfulness>=0.8"]`, or a `judge.Gates`): one naming a metric the run does not
            compute, or a metric the test set cannot feed, is refused before the app is
            asked. The folder's summary.json records them and their verdict; to fail on
            a missed one, call `judge.assert_evaluation(result, gates=...)`. A `write`
            given writes the folder instead, and applies the gates itself.
        record: record the run in the run store ($JUDGE_RUNS, else .judge/runs.sqlite),
            as `judge experiment` does, so `judge runs` and `judge view` show it; False
            skips it (`--no-record`).
        write: what writes the judged run into the output folder while it is still
            locked (`judge experiment` writes it with its gates and prints its verdict);
            default `judge.run.outputs.write_outputs` with `gates`.

    Returns:
        The `EvaluationResult` of the app's outputs; `result.config.app` records the app
        (target, source fingerprint) and its calls (asked, reused, errors by type,
        latency). A question the app failed on is a row error (its metrics NaN, counted
        against `max_error_rate` when the result is written with gates).
    """
    if app_concurrency < 1:
        raise JudgeError(f"app_concurrency={app_concurrency}: give at least 1")
    if not app_timeout > 0:
        raise JudgeError(f"app_timeout={app_timeout}: give a positive number of seconds")
    gates = None if gates is None else as_gates(gates)
    loaded = as_app(load_target(app), app) if isinstance(app, str) else as_app(app)
    # Paths resolved once, before the app runs: an app may change the working directory.
    out = os.path.abspath(out)
    if isinstance(cache, (str, os.PathLike)):
        cache = os.path.abspath(cache)
    testset = load_testset(data, column_map=column_map, qrels=qrels)
    if testset.chats is not None and loaded.chat is None:
        raise AppError(
            f"{testset.source} holds conversations, but app {loaded.target} takes no "
            "conversation: its later turns would be asked without the messages before "
            "them. Give it a parameter named history (app(question, history), the "
            "messages before the question) or take the conversation as its one parameter "
            "named messages"
        )
    if llm is None:
        metrics = _retrieval_only(metrics, testset)
    spec = RunSpec(
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        cache=cache,
        concurrency=concurrency,
        progress=progress,
        progress_interval=progress_interval,
        gates=gates,
    )
    # the test set and the judge checked before the app is asked, not after
    await check_testset(testset, spec)
    await check_judge(spec)
    with OutputFolder(out, inputs=testset.files()) as folder:
        try:
            result = await run_experiment(
                loaded,
                testset,
                folder,
                spec,
                app_concurrency=app_concurrency,
                app_timeout=app_timeout,
            )
        except (LLMConfigError, CacheStoreError) as exc:  # the judging cannot work
            raise type(exc)(
                f"{exc}; the app's outputs are kept in {folder.path}/{APP_OUTPUTS}: "
                "rerun to judge them without asking the app again"
            ) from None
        if write is None:
            write_outputs(result, folder, gates=gates)
        else:
            write(result, folder)
        finished(folder.path)
    if record:
        record_written(out, command="experiment")
    return result


def _retrieval_only(metrics: Sequence[MetricLike] | None, testset: TestSet) -> list[MetricLike]:
    """The metrics of an experiment without a judge model: retrieval ones alone (judge ir's
    default when none are named), and relevance labels to score them with; refused before
    the app is asked otherwise."""
    from judge.metrics.resolve import NO_JUDGE_MODEL, split_metrics

    if testset.qrels_source is None:
        raise JudgeError(
            "nothing to judge: give llm=judge.LLM(model=...) for the LLM-judged metrics, or "
            "relevance labels (qrels=, a test set folder, a relevance column) for the "
            "retrieval metrics"
        )
    if metrics is None:
        return list(DEFAULT_METRICS)  # judge ir's: a retrieval-only experiment
    judged = split_metrics(metrics, has_retrieval=True)[0] or []
    if judged:
        listed = ", ".join(m if isinstance(m, str) else m.name for m in judged)
        raise JudgeError(f"{NO_JUDGE_MODEL}: {listed}")
    return list(metrics)


experiment = sync_twin(aexperiment)
