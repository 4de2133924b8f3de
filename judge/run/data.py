"""Loading evaluation data: datasets, lists of dicts, DataFrames and files, row by row.

Our column names (question, answer, contexts, ground_truth) and RAGAS's (user_input,
response, retrieved_contexts, reference) are recognised; anything else is mapped with
`column_map`. A whole-input problem (a missing file, no usable column) is one clear
error before any LLM call; a bad row is reported with its number and scored as an error,
never stopping the run.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
import os
from abc import abstractmethod
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, overload

from judge.conversations import (
    CONVERSATION_ERROR,
    TurnHistory,
    conversation_rows,
    distinct_turns,
    flat_turn_records,
    has_places,
    is_conversation,
    is_flat_turns,
)
from judge.errors import InputFormatError
from judge.fields import Field, FieldTable, cell_list
from judge.json_values import lone_surrogate_in
from judge.lines import bounded_lines, not_a_file, universal_lines
from judge.samples import ROLES, Message, Sample

COLUMNS = FieldTable(
    (
        Field(
            "question",
            ("question", "user_input", "query"),
            required=True,
            hint="column_map={'question': ...}",
            synonyms=("input", "prompt", "user_query"),
        ),
        Field("answer", ("answer", "response"), synonyms=("actual_output", "output")),
        Field(
            "contexts",
            ("contexts", "retrieved_contexts"),
            synonyms=("docs", "retrieval_context", "documents", "passages", "context"),
        ),
        Field(
            "ground_truth",
            ("ground_truth", "reference", "ground_truths"),
            synonyms=("expected_output", "expected_answer", "reference_answer"),
        ),
        Field("id", ("id", "sample_id")),
        Field("retrieved_ids", ("retrieved_ids", "retrieved_context_ids")),
        Field("relevance", ("relevance", "qrels", "relevant_ids", "reference_context_ids")),
        # A conversation's turn (judge.conversations makes them): the messages before it.
        Field("history", ("history",)),
        Field("conversation_id", ("conversation_id",)),
        Field("turn", ("turn",)),
    ),
    unknown_field="column_map key {field!r} is not one of {fields}",
    absent_column="column_map: column {column!r} is not in the data (columns: {columns})",
    mapping="column_map={{{field}: {column}}}",
)
# An experiment's app_outputs.jsonl (judge.experiments) records there why the app gave no
# output for a question: the row is an error, as an unreadable row is.
APP_ERROR = "app_error"
APP_FAILED = "the app failed on this question"
_FILE_TYPES = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


@dataclass
class Row:
    """One input row: its number, the sample built from it, or why it could not be."""

    number: int
    sample: Sample | None = None
    error: str | None = None
    retrieved_ids: list[str] | None = None
    relevance: dict[str, int] | None = None
    # What results.jsonl says of a row the app failed on, which has no sample.
    id: Any = None
    question: str | None = None
    # What a shard splits on when it is not the row number: the turn's conversation.
    unit: int | None = None


def read_records(data: Any) -> tuple[list[dict[str, Any]], str]:
    """The rows of any supported input as dicts, and a short description of the source."""
    return _read_any(data)


def as_turn_records(
    records: list[dict[str, Any]], column_map: Mapping[str, str] | None = None, source: str = ""
) -> list[dict[str, Any]]:
    """Records of conversations (or a flat table of turns, its columns mapped as the user
    maps them) as one record per turn, with its history; other records as they are."""
    if records and is_conversation(records[0]):
        return [row for _, row in conversation_rows(enumerate(records))]
    names = list(dict.fromkeys(k for r in records for k in r))
    if is_flat_turns(names):
        return flat_turn_records(records, resolve_columns([*names, "history"], column_map, source))
    return records


def _read_any(data: Any) -> tuple[list[dict[str, Any]], str]:
    """The records of any supported input, as the input holds them."""
    if isinstance(data, (str, os.PathLike)):
        return _records_from_path(data)
    if isinstance(data, list):
        if not all(isinstance(r, Mapping) for r in data):
            raise InputFormatError("a list input must hold one dict per sample")
        return [dict(r) for r in data], f"list of {len(data)} dicts"
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        frame = data
        return frame.to_dict(orient="records"), f"DataFrame of {len(frame)} rows"
    if module == "datasets":
        if type(data).__name__ == "DatasetDict":
            splits = list(data)
            raise InputFormatError(
                f"a DatasetDict holds several splits ({', '.join(splits)}); pass one, "
                f"e.g. data['{splits[0]}']"
            )
        return list(data), f"Dataset of {len(data)} rows"
    raise InputFormatError(
        f"cannot read evaluation data from a {type(data).__name__}; pass a datasets.Dataset, "
        "a list of dicts, a pandas DataFrame, a .jsonl/.json/.csv/.parquet path, a saved "
        "dataset folder, or hf://owner/name for a dataset on the Hugging Face hub"
    )


HUB = "hf://"  # the only way to name a dataset on the Hugging Face hub


def _records_from_path(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], str]:
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith(HUB):
        return _read_any(dataset_of_hub(text))[0], text
    p, kind = checked_path(text)
    try:
        if kind == "json":
            return _read_json(p), str(p)
        if kind == "csv":
            import pandas

            frame = pandas.read_csv(p, keep_default_na=False, dtype=str)
            return frame.to_dict(orient="records"), str(p)
        return _read_any(dataset_of_file(p, kind))[0], str(p)
    except InputFormatError:
        raise
    except Exception as exc:  # the readers' own errors: not parseable, not found
        raise cannot_read(p, exc) from exc


def cannot_read(path: Path, exc: Exception) -> InputFormatError:
    """The error of a file a reader (pandas, pyarrow, datasets) refused, with its words."""
    said = " ".join(str(exc).split())  # pandas ends its message in a newline
    return InputFormatError(f"{path}: cannot be read ({type(exc).__name__}: {said})")


def checked_path(text: str) -> tuple[Path, str | None]:
    """A data path and its kind ("json", "csv", "parquet"; None for a dataset folder),
    refused when it is no such file or folder, or of a type judge does not read."""
    p = Path(text)
    kind = _FILE_TYPES.get(p.suffix.lower())
    if kind is not None and not p.is_file():
        raise InputFormatError(not_a_file(p))
    if not p.exists():
        # Never a guess that a missing path is a hub name: a typo must not go to the network.
        raise InputFormatError(
            f"{p}: no such file or folder; to read a dataset from the Hugging Face hub, "
            f"name it {HUB}{text} (or {HUB}{text}:SPLIT)"
        )
    if kind is None and not p.is_dir():
        raise InputFormatError(
            f"{p}: unsupported file type {p.suffix or '(no suffix)'!r} "
            "(use .jsonl, .json, .csv or .parquet)"
        )
    return p, kind


def dataset_of_file(path: Path, kind: str | None) -> Any:
    """The `datasets.Dataset` of a Parquet file or a saved dataset folder (memory-mapped,
    not read); the reader's own errors are raised as they are."""
    import datasets

    if kind == "parquet":
        return datasets.load_dataset("parquet", data_files=str(path), split="train")
    return datasets.load_from_disk(str(path))


def dataset_of_hub(source: str) -> Any:
    """The `datasets.Dataset` of hf://owner/name or hf://owner/name:split, from the Hugging
    Face hub (memory-mapped from its cache, not read)."""
    name, _, split = source[len(HUB) :].partition(":")
    if not name:
        raise InputFormatError(f"{source}: name the dataset, e.g. {HUB}owner/name")
    import datasets

    try:
        loaded = datasets.load_dataset(name, split=split) if split else datasets.load_dataset(name)
    except Exception as exc:  # not found, no network, not a dataset
        raise InputFormatError(f"{source}: cannot be read ({type(exc).__name__}: {exc})") from exc
    if type(loaded).__name__ == "DatasetDict":
        splits = list(loaded)
        raise InputFormatError(
            f"{source} holds several splits ({', '.join(splits)}); name one, "
            f"e.g. {HUB}{name}:{splits[0]}"
        )
    return loaded


def text_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number from 1, line) of the lines of a file's text, split on "\\n" only (a "\\r"
    before it dropped); nothing after a final newline.

    Never `str.splitlines()`: it also splits on U+2028, U+0085, a form feed and other
    Unicode line breaks, which a JSON line may hold raw inside a string (json.dumps with
    ensure_ascii=False writes U+2028 as it is).
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line[:-1] if line.endswith("\r") else line


def loads_json(text: str) -> Any:
    """json.loads, also taking control characters (a tab, a form feed) raw inside strings,
    as hand-made and exported JSON often holds them."""
    if text.startswith("\ufeff"):  # refused with json.loads's own message, as it was
        return json.loads(text, strict=False)
    return _LOOSE.decode(text)


class _DoubledKeys(dict):  # type: ignore[type-arg]
    """A JSON object that gave a key twice, as json.loads reads it (the last value kept),
    with the keys given twice: a relevance object's doc graded twice is a row error."""

    doubled: list[str]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as json.loads builds it, marked when a key is given twice."""
    built = dict(pairs)
    if len(built) == len(pairs):
        return built
    marked = _DoubledKeys(built)
    counts = Counter(k for k, _ in pairs)
    marked.doubled = [k for k, n in counts.items() if n > 1]
    return marked


# What json.loads(text, strict=False) builds on every call (every input line, read twice);
# its objects built by `_object` (5% more time per line).
_LOOSE = json.JSONDecoder(strict=False, object_pairs_hook=_object)


def _read_json(path: Path) -> list[dict[str, Any]]:
    if path.suffix.lower() == ".json":
        try:
            # utf-8-sig: a byte order mark (as Windows editors save) is no JSON, and read
            # as the .jsonl and .csv readers read it
            value = loads_json(path.read_text(encoding="utf-8-sig"))
        except RecursionError:
            raise InputFormatError(f"{path}: {NESTED}") from None
        if isinstance(value, dict):  # {"column": [values...]}
            columns = {k: v for k, v in value.items() if isinstance(v, list)}
            lengths = {len(v) for v in columns.values()}
            if len(lengths) != 1:
                raise InputFormatError(f"{path}: a JSON object must map columns to equal lists")
            return [
                dict(zip(columns, values, strict=True))
                for values in zip(*columns.values(), strict=True)
            ]
        if not isinstance(value, list):
            raise InputFormatError(f"{path}: expected a list of objects")
        for number, item in enumerate(value):
            if not isinstance(item, dict):
                raise InputFormatError(
                    f"{path}: item {number} is a {type(item).__name__}, "
                    "not an object with one field per column"
                )
        return value
    return [json_record(line, path, number) for number, line in jsonl_lines(path) if line.strip()]


def json_record(text: str, path: Path, number: int) -> dict[str, Any]:
    """One JSON-lines record, or the InputFormatError naming its file and line."""
    try:
        record = loads_json(text)
    except RecursionError:
        raise InputFormatError(f"{path}:{number}: {NESTED}") from None
    except ValueError as exc:  # not JSON, an integer of 5,000 digits
        raise InputFormatError(f"{path}:{number}: not JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise InputFormatError(
            f"{path}:{number}: a {type(record).__name__}, not an object with one field per column"
        )
    return record


NESTED = "JSON nested too deeply (arrays or objects inside one another past Python's limit)"


def jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(number from 1, text without its line end) of the lines of a JSON-lines file as
    text mode splits them (on \\n, \\r\\n and \\r: `judge.lines.universal_lines`), each
    read with the line limit: a file of one endless line is refused, not read into
    memory."""
    with path.open("rb") as handle:
        for number, raw in universal_lines(handle, path):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputFormatError(f"{path}:{number}: not UTF-8 ({exc})") from None
            yield number, text.rstrip("\r\n")


T = TypeVar("T")


class LazySequence(Sequence[T]):
    """A sequence whose items are built when used: a subclass gives `__len__` and `at` (an
    item by its number from 0), and may give a faster `__iter__`; negative indexes, the
    bounds and slices (a list) are handled here."""

    @abstractmethod
    def at(self, number: int) -> T:
        """The item numbered `number`, from 0 to len - 1."""

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self.at(i) for i in range(*index.indices(len(self)))]
        return self.at(range(len(self))[index])


class JsonlRecords(LazySequence[dict[str, Any]]):
    """The records of a JSON-lines file read when used, from the byte offsets of its lines:
    memory holds 8 bytes a record, whatever the records hold.

    Made by `scan`, which reads every line once and refuses the file as `read_records`
    does (a line that is not a JSON object); each access parses its line again, and the
    file must not change while the records are used.

    Attributes:
        path: the file.
        names: every column name, in the order first seen.
        field: the key of each line's object that holds the record (None: the object).
    """

    def __init__(
        self,
        path: Path,
        offsets: Sequence[int],
        names: Sequence[str] = (),
        identity: tuple[int, ...] | None = None,
        field: str | None = None,
    ):
        self.path = path
        self.names = tuple(names)
        self.field = field
        self._offsets = array("q", offsets)
        self._identity = identity if identity is not None else file_identity(path)

    @classmethod
    def scan(cls, path: str | os.PathLike[str]) -> JsonlRecords:
        """The records of a .jsonl file, every line checked."""
        p = Path(path)
        if not p.is_file():
            raise InputFormatError(not_a_file(p))
        offsets: list[int] = []
        names: dict[str, None] = {}
        offset = 0
        identity = file_identity(p)
        with p.open("rb") as lines:
            for number, line in bounded_lines(lines, p):
                if b"\r" in line.rstrip(b"\r\n"):
                    raise InputFormatError(
                        f"{p}:{number}: lines end in carriage returns alone (an old Mac "
                        "file): save it with \\n (or \\r\\n) line endings"
                    )
                if _decoded(line, p, number).strip():  # str.strip: any Unicode space is blank
                    record = _record(line, p, number)
                    offsets.append(offset)
                    names.update(dict.fromkeys(record))
                offset += len(line)
        if file_identity(p) != identity:
            raise changed_error(p)
        return cls(p, offsets, list(names), identity)

    def _open(self) -> BinaryIO:
        """The file, checked to be the one scanned: its lines are read at their offsets."""
        if file_identity(self.path) != self._identity:
            raise changed_error(self.path)
        return self.path.open("rb")

    def __len__(self) -> int:
        return len(self._offsets)

    def at(self, number: int) -> dict[str, Any]:
        """The record numbered `number`, parsed from its line."""
        with self._open() as lines:
            lines.seek(self._offsets[number])
            return self._parsed(lines.readline())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        with self._open() as lines:
            for offset in self._offsets:
                lines.seek(offset)
                yield self._parsed(lines.readline())

    def _parsed(self, line: bytes) -> dict[str, Any]:
        record = _record(line, self.path, None)
        return record if self.field is None else record[self.field]


def file_identity(path: Path) -> tuple[int, ...]:
    """What tells that a file changed: its inode, size, modification time and change time
    (ns). The change time moves on every write and no user can set it back, so a file
    rewritten in place at the same size with its modification time restored (`cp -p`,
    `touch -r`, `rsync --inplace -t`) is seen too."""
    stat = path.stat()
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def changed_error(path: Path) -> InputFormatError:
    """The error of an input file that changed while its rows were read."""
    return InputFormatError(
        f"{path} changed since it was read: its rows are read from it as they are used, "
        "so it must stay as it is during the run; rerun on the file as it is now (copy it "
        "first to edit it during a run)"
    )


def _decoded(line: bytes, path: Path, number: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"{path}:{number}: not UTF-8 ({exc})") from None


def _record(line: bytes, path: Path, number: int | None) -> dict[str, Any]:
    """One JSON-lines record (a JSON object), as `_read_json` reads it."""
    where = f"{path}:{number}" if number is not None else str(path)
    try:
        record = loads_json(line.decode("utf-8"))
    except RecursionError:
        raise InputFormatError(f"{where}: {NESTED}") from None
    except ValueError as exc:  # not JSON, not UTF-8, an integer of 5,000 digits
        raise InputFormatError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise InputFormatError(
            f"{where}: a {type(record).__name__}, not an object with one field per column"
        )
    return record


class LazyRows(LazySequence[Row]):
    """The rows of a JSON-lines file, each built from its line when used (see
    `JsonlRecords`): what `load_rows` gives, without holding every row."""

    def __init__(self, records: JsonlRecords, columns: Mapping[str, str]):
        self.records = records
        self.columns = dict(columns)

    def __len__(self) -> int:
        return len(self.records)

    def at(self, number: int) -> Row:
        """The row numbered `number`, built from its line."""
        return build_rows([self.records[number]], self.columns, [number])[0]

    def __iter__(self) -> Iterator[Row]:
        for number, record in enumerate(self.records):
            yield build_rows([record], self.columns, [number])[0]


def load_rows_lazily(
    path: str | os.PathLike[str], column_map: Mapping[str, str] | None = None
) -> tuple[LazyRows, dict[str, str], str]:
    """`load_rows` of a .jsonl file whose rows are read from it when used (`LazyRows`), so
    a run over it holds no row it is not judging; the file must stay as it is meanwhile."""
    records = JsonlRecords.scan(path)
    source = str(records.path)
    if not records:
        raise InputFormatError(f"{source}: no rows to evaluate")
    columns = resolve_columns(records.names, column_map, source)
    return LazyRows(records, columns), columns, source


def resolve_columns(
    names: Iterable[str], column_map: Mapping[str, str] | None, source: str = ""
) -> dict[str, str]:
    """field -> column, from the column names present and the user's mapping (`COLUMNS`);
    `source`, the data's name, is put before an error."""
    return COLUMNS.resolve(names, column_map, source)


def _list_of_str(value: Any, name: str) -> list[str]:
    try:
        value = cell_list(value)
    except ValueError:
        raise ValueError(
            f"{name} must be a list of strings (a JSON list in CSV), got {value!r:.80}"
        ) from None
    if hasattr(value, "tolist"):  # numpy arrays from pandas/parquet
        value = value.tolist()
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a list of strings, got {type(value).__name__}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            what = "null" if item is None else f"a {type(item).__name__}"
            raise ValueError(f"{name} must be a list of strings: {name} item {index} is {what}")
    return value


def parse_relevance(value: Any) -> dict[str, int]:
    """A row's relevance judgments as {doc_id: grade}: from a list of relevant ids (grade 1),
    a {doc_id: grade} mapping (or an Arrow map column's (doc_id, grade) pairs), or either
    as JSON text (an empty or blank text: none). A None grade is no judgment: Parquet and
    `datasets` keep every row's mapping in one struct, so a row reads back the other rows'
    documents with None. A doc graded twice is an error: which grade holds is not known."""
    if isinstance(value, str):
        if not value.strip():  # an empty CSV cell, as an empty retrieved_ids cell
            return {}
        try:
            # (objects marked by `_object`: json.loads would keep the last of a doc's two
            # grades without a word)
            value = json.loads(value, object_pairs_hook=_object)
        except json.JSONDecodeError:
            raise ValueError(
                "relevance must be a list of relevant ids or a {id: grade} mapping (JSON "
                f"text in CSV), got {value!r:.80}"
            ) from None
    if isinstance(value, _DoubledKeys):  # a JSON object given a doc twice (the last kept)
        raise ValueError(f"relevance grades {value.doubled[0]!r} twice: give each doc one grade")
    pairs = _grade_pairs(value)
    if pairs is None:
        return {doc: 1 for doc in _list_of_str(value, "relevance")}  # a list of relevant ids
    grades: dict[str, int] = {}
    for doc, grade in pairs:
        if grade is None:
            continue
        if str(doc) in grades:
            raise ValueError(f"relevance grades {str(doc)!r} twice: give each doc one grade")
        grades[str(doc)] = _whole_grade(grade, doc)
    return grades


def _whole_grade(grade: Any, doc: Any) -> int:
    """A relevance grade as an int: a whole number, numpy's too (np.int64 from pandas and
    Parquet, 2.0 from a float column), a Decimal's (2.00 from a decimal column, as
    `judge.ir` takes it); anything else (True, 1.5, inf, NaN, "1") is an error, as is a
    number beyond a double's range, which `judge.ir` refuses."""
    value = _whole_number(grade)
    if value is None:
        raise ValueError(f"relevance grade {grade!r} of {doc!r} is not an integer")
    try:
        float(value)
    except OverflowError:
        # (its digits unsaid: Python refuses to write an int of more than 4,300)
        raise ValueError(
            f"relevance grade of {doc!r} is too large for a double (grades are scored as "
            "doubles, as in judge.ir): give it as a small integer"
        ) from None
    return value


def _whole_number(grade: Any) -> int | None:
    if isinstance(grade, bool):
        return None
    if isinstance(grade, numbers.Integral):
        return int(grade)
    if isinstance(grade, numbers.Real):
        number = float(grade)
        return int(number) if math.isfinite(number) and number.is_integer() else None
    # (no Real: exact, where float() would round 2.000000000000000000001 to 2.0)
    if isinstance(grade, decimal.Decimal) and grade.is_finite():
        return int(grade) if grade == grade.to_integral_value() else None
    return None


def _grade_pairs(value: Any) -> Iterable[tuple[Any, Any]] | None:
    """The (doc, grade) pairs of a mapping (a JSON object's too) or of an Arrow map column
    (Parquet, `datasets`: a list of (key, value) tuples); None for anything else."""
    if isinstance(value, Mapping):
        return value.items()
    if (
        isinstance(value, list)
        and value
        and all(type(p) is tuple and len(p) == 2 and isinstance(p[0], str) for p in value)
    ):
        return value  # a map column's entries (a list of ids is a list of strings)
    return None


def _missing(value: Any) -> bool:
    """Whether a cell is missing: None, or the NaN pandas fills a column a row lacks with."""
    return value is None or (isinstance(value, float) and value != value)


def _present(value: Any) -> Any:
    """A cell's value, None when it is missing (`_missing`)."""
    return None if _missing(value) else value


def _text(value: Any, name: str) -> str | None:
    if _missing(value):
        return None
    if (
        isinstance(value, list)
        and name == "ground_truth"
        and all(isinstance(v, str) for v in value)
    ):
        return " ".join(value)  # RAGAS's old ground_truths column
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {type(value).__name__}")
    return value


def load_rows(
    data: Any, column_map: Mapping[str, str] | None = None
) -> tuple[list[Row], dict[str, str], str]:
    """(rows, field -> column used, source description); bad rows carry their error."""
    records, source = read_records(data)
    given = records
    records = as_turn_records(records, column_map, source)
    turned = records is not given  # conversations' turns, read each place once
    if not records:
        raise InputFormatError(f"{source}: no rows to evaluate")
    columns = resolve_columns(dict.fromkeys(k for r in records for k in r), column_map, source)
    if has_places(columns) and not turned:  # rows giving their own place: each place once
        records = [record for _, record in distinct_turns(enumerate(records), columns)]
    return build_rows(records, columns), columns, source


def build_rows(
    records: Sequence[Mapping[str, Any]],
    columns: Mapping[str, str],
    numbers: Sequence[int] | None = None,
) -> list[Row]:
    """Rows from records with the columns already chosen (field -> column); bad rows carry
    their error. `numbers` are the rows' numbers in the whole input (default 0, 1, ...):
    a row without an id column takes its number as id."""
    used = set(columns.values())
    rows = []
    for index, record in enumerate(records):
        number = index if numbers is None else numbers[index]
        row = Row(number)
        failure = record.get(APP_ERROR)
        if is_app_failure(failure):
            rows.append(
                Row(number, error=app_failure(failure), **_identity_of(record, columns, number))
            )
            continue
        unreadable: Any
        if is_conversation(record):  # a conversation among rows (it is not read as one)
            unreadable = (
                "this record is a conversation, but the input's first record is a row: an "
                "input holds rows or conversations, not a mix of them; give each kind a file "
                "of its own"
            )
        else:
            unreadable = record.get(CONVERSATION_ERROR)
        if isinstance(unreadable, str):
            rows.append(Row(number, error=unreadable, **_identity_of(record, columns, number)))
            continue
        try:
            # (a missing cell, None or pandas' NaN, as no value)
            get = {fld: _present(record.get(col)) for fld, col in columns.items()}
            if "retrieved_ids" in columns and get["retrieved_ids"] is not None:
                row.retrieved_ids = _list_of_str(get["retrieved_ids"], "retrieved_ids")
            if "relevance" in columns and get["relevance"] is not None:
                row.relevance = parse_relevance(get["relevance"])
            place = _place_in_conversation(get)
            row.sample = Sample.create(
                get.get("question"),
                _text(get.get("answer"), "answer"),
                _list_of_str(get.get("contexts"), "contexts"),
                _text(get.get("ground_truth"), "ground_truth"),
                get.get("id") if get.get("id") is not None else number,
                {k: v for k, v in record.items() if k not in used},
                **place,
            )
        except (ValueError, TypeError, OverflowError, RecursionError) as exc:
            row.error = str(exc) or type(exc).__name__  # InputFormatError is a ValueError
            # results.jsonl says which row it was, as far as it can be read
            known = _identity_of(record, columns, number)
            row.id, row.question = known["id"], known["question"]
        broken = _lone_surrogate(record)
        if broken is not None:  # nothing of the row is kept: none of it can be written
            row = Row(number, error=broken)
        rows.append(row)
    return rows


def _place_in_conversation(get: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's history, position and conversation as `Sample.create` takes them; none for
    a row that is no conversation's turn (no conversation_id and turn)."""
    cid, turn = get.get("conversation_id"), get.get("turn")
    if cid is None or turn is None:
        if get.get("history") is not None:
            raise ValueError("history is read only with conversation_id and turn")
        return {}
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
        raise ValueError(f"turn must be a positive integer, got {turn!r}")
    if isinstance(cid, bool) or not isinstance(cid, (str, int)) or not str(cid).strip():
        raise ValueError(f"conversation_id must be a string or an integer, got {cid!r}")
    value = get.get("history")
    return {
        "history": _shared(value, turn) or _ordered(parse_history(value), turn),
        "turn": turn,
        "conversation_id": str(cid),
    }


def _shared(value: Any, turn: int) -> Sequence[Message] | None:
    """The messages of a history the conversation reader made (`TurnHistory`), made once
    per conversation and in order by construction; None for any other history."""
    if not isinstance(value, TurnHistory):
        return None
    messages = value.messages()
    if messages is None or (messages and messages[-1].turn > turn):
        return None
    if messages and messages[-1].role == "assistant" and messages[-1].turn == turn:
        return None  # an answer at the row's turn: `_ordered` says what is wrong
    return messages


def parse_history(value: Any) -> list[Message]:
    """A turn's `history` (a list of messages with role, content, turn and, for the
    assistant's, contexts) as Messages; a ValueError says what is wrong."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError("history must be a list of messages")
    messages = []
    for index, item in enumerate(value):
        where = f"history message {index + 1}"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where} must be an object with role, content and turn")
        role, content, turn = item.get("role"), item.get("content"), item.get("turn")
        if role not in ROLES or not isinstance(content, str):
            raise ValueError(f"{where} needs a role ({', '.join(ROLES)}) and a text content")
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise ValueError(f"{where} needs its turn, a positive integer")
        contexts = _list_of_str(item.get("contexts"), f"{where}'s contexts")
        messages.append(Message(role, content, turn, tuple(contexts)))
    return messages


def _ordered(history: list[Message], turn: int) -> list[Message]:
    """A turn's history if its messages come before the turn, in order, with one answer a
    turn; else a ValueError. A flat table's row numbers its own question with its turn: a
    message may share the row's turn, an answer may not (it would answer after the row)."""
    last, answered = 0, set()
    for index, message in enumerate(history):
        limit = turn - 1 if message.role == "assistant" else turn
        if not last <= message.turn <= limit or message.turn < 1:
            raise ValueError(
                f"history message {index + 1}: turn {message.turn} is not in order: a "
                "history's turns are positive and never decrease, its answers' below the "
                f"row's turn {turn} and its other messages' at most that"
            )
        if message.role == "assistant":
            if message.turn in answered:
                raise ValueError(
                    f"history message {index + 1}: a second assistant message at turn "
                    f"{message.turn}; each turn has one answer"
                )
            answered.add(message.turn)
        last = message.turn
    return history


def _identity_of(
    record: Mapping[str, Any], columns: Mapping[str, str], number: int
) -> dict[str, Any]:
    """The id (the row's number when it has none) and question of a row that has no
    sample, as far as they can be read."""
    ident = record.get(columns.get("id", ""))
    question = record.get(columns.get("question", ""))
    return {
        "id": ident if isinstance(ident, (str, int)) and not isinstance(ident, bool) else number,
        "question": question if isinstance(question, str) else None,
    }


def is_app_failure(value: Any) -> bool:
    """Whether an app_error value records a failure: a failure object (a mapping with a
    type or message, as judge.experiments writes) or a non-blank string; false, 0, "" and
    null in a user's own column of that name are no failure."""
    if isinstance(value, Mapping):
        return bool(value.get("type") or value.get("message"))
    return isinstance(value, str) and bool(value.strip())


def app_failure(failure: Any) -> str:
    """A row's error for an app_error record ({"type", "message", "where"})."""
    if not isinstance(failure, Mapping):
        return f"{APP_FAILED}: {failure}"
    where = f" at {failure['where']}" if failure.get("where") else ""
    return f"{APP_FAILED}: {failure.get('type', 'error')}: {failure.get('message', '')}{where}"


def _lone_surrogate(record: Mapping[str, Any]) -> str | None:
    """Why a record's text is not Unicode text, or None: a lone surrogate (what json.loads
    makes of "\\ud800") cannot be written as UTF-8, so no hash, cache key or output line
    can hold it. Checked after the row is built, so ordinary rows pay one pass."""
    for column, value in record.items():
        where = lone_surrogate_in(column) or (
            value.lone_surrogate() if isinstance(value, TurnHistory) else lone_surrogate_in(value)
        )
        if where is not None:
            return (
                f"column {column!r} holds a lone surrogate ({where}), which is not Unicode "
                "text: half of a UTF-16 pair, from a broken \\u escape in JSON or a wrong "
                "decoding; fix or drop that text"
            )
    return None
