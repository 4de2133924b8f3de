"""Evaluation data read as a run consumes it: `open_input` gives `InputRows`, whose rows are
built from the input each time they are iterated, so a run holds the rows in flight, never
all of them.

A run needs three things of its input before the first row is judged: the column names
(the columns are resolved from all of them, as `load_rows` resolves them), the number of
rows (for the progress, the tally of the results and a shard's size) and that every
record is readable (a line that is not a JSON object refuses the whole input before any
request, as it always has). `open_input` gets them in one cheap pre-pass that keeps
nothing per row: JSON lines are parsed and dropped, CSV is parsed in chunks, Parquet and
datasets give theirs from their metadata. The data hash (`data_sha256` of the summary) is
not part of the pre-pass: it needs every row built, which is the run's own work, so the run
computes it on the way (`judge.run.local.execute`) and summary.json records it after the
fact. Only a run split over processes needs it before judging (each shard's summary
holds it): the parent hashes the rows in a pass of its own, and the shards, which read
only their rows, check that the input is the one hashed (`identity`).

Rows are numbered by position in the input, as `load_rows` numbers them; a shard's rows
(`InputRows.only`) are found by position too, and only those are parsed and built.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from judge.conversations import (
    CONVERSATION_KEYS,
    DistinctIds,
    conversation_rows,
    distinct_turns,
    flat_turn_records,
    flat_turn_units,
    has_places,
    is_conversation,
    is_flat_turns,
)
from judge.errors import InputFormatError
from judge.lines import universal_lines
from judge.run.data import (
    HUB,
    Row,
    build_rows,
    cannot_read,
    changed_error,
    checked_path,
    dataset_of_file,
    dataset_of_hub,
    file_identity,
    json_record,
    jsonl_lines,
    read_records,
    resolve_columns,
)
from judge.run.digest import DataDigest
from judge.run.shard import Shard

# Rows converted at once from a DataFrame, a CSV file or a Parquet row group: bounds the
# memory of a batch, and costs nothing measurable per row.
BATCH = 1024


class Records(ABC):
    """The records (dicts) of one input, read in order each time `read` is called.

    Attributes:
        source: the input as summary.json names it.
    """

    source: str

    @abstractmethod
    def scan(self) -> tuple[list[str], int]:
        """The pre-pass: every column name (in the order first seen) and the number of
        records; a record that cannot be read is an `InputFormatError` here."""

    @abstractmethod
    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """(number from 0, record) of every record, or only of those the shard holds (the
        others are skipped unparsed where the format allows)."""

    # What a shard splits the records on (`judge.run.shard.Shard.unit`): each row, or each
    # conversation for records that are turns of conversations.
    unit = "row"

    def read_units(self, shard: Shard | None = None) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(number from 0, unit number, record) of the records the shard holds: the unit is
        the number a shard splits on, the record's own here."""
        for number, record in self.read(shard):
            yield number, number, record

    def identity(self) -> str | None:
        """What tells that the input changed since it was scanned (None: nothing does)."""
        return None

    def changed(self, count: int) -> InputFormatError:
        """The error of a read that gave more than the `count` records the scan found."""
        return InputFormatError(
            f"{self.source} changed since it was read: it holds more than the {count} rows "
            "it had when the run started; run again on the input as it is now"
        )


def _held(shard: Shard | None, number: int) -> bool:
    return shard is None or shard.holds(number)


def _held_turn(shard: Shard | None, number: int, unit: int) -> bool:
    """Whether the shard holds a turn: by its conversation (`unit`) for a shard by
    conversation, else by its row number."""
    return shard is None or shard.holds(unit if shard.unit == "conversation" else number)


class ListRecords(Records):
    """The records of a list of mappings (or of a whole .json file), copied one by one."""

    def __init__(self, records: Sequence[Mapping[str, Any]], source: str):
        self.records = records
        self.source = source

    def scan(self) -> tuple[list[str], int]:
        """Every key of every record, and their number."""
        return list(dict.fromkeys(k for r in self.records for k in r)), len(self.records)

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each record as a dict of its own."""
        start, step = (shard.index - 1, shard.count) if shard else (0, 1)
        for number in range(start, len(self.records), step):
            yield number, dict(self.records[number])


class FrameRecords(Records):
    """The records of a pandas DataFrame, converted a batch of rows at a time."""

    def __init__(self, frame: Any):
        self.frame = frame
        self.source = f"DataFrame of {len(frame)} rows"

    def scan(self) -> tuple[list[str], int]:
        """Its columns and rows."""
        return list(dict.fromkeys(self.frame.columns)), len(self.frame)

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each row as `DataFrame.to_dict(orient="records")` gives it, a batch at a time."""
        size = len(self.frame)
        for start in range(0, size, BATCH):
            numbers = [n for n in range(start, min(size, start + BATCH)) if _held(shard, n)]
            taken = self.frame.iloc[numbers]
            yield from zip(numbers, taken.to_dict(orient="records"), strict=True)


class DatasetRecords(Records):
    """The records of a `datasets.Dataset`, read lazily from its Arrow table as iterating
    the dataset reads them."""

    def __init__(self, dataset: Any, source: str | None = None):
        self.dataset = dataset
        self.source = source or f"Dataset of {len(dataset)} rows"

    def scan(self) -> tuple[list[str], int]:
        """Its columns and rows, from its schema."""
        return list(self.dataset.column_names), len(self.dataset)

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each row as iterating the dataset gives it; a shard's rows alone are selected
        (by position) and read."""
        if shard is None:
            yield from enumerate(self.dataset)
            return
        numbers = range(shard.index - 1, len(self.dataset), shard.count)
        yield from zip(numbers, self.dataset.select(numbers), strict=True)

    def identity(self) -> str | None:
        """The dataset's fingerprint (`datasets` changes it with the data)."""
        return getattr(self.dataset, "_fingerprint", None)


class FileRecords(Records):
    """The records of a file, checked not to change between reads."""

    def __init__(self, path: Path):
        self.path = path
        self.source = str(path)
        # The identity the file had when scanned (or in the process that scanned it):
        # every read checks it before and after.
        self.expected: str | None = None

    def identity(self) -> str | None:
        """The file's inode, size, modification and change times (`file_identity`)."""
        return ":".join(map(str, file_identity(self.path)))

    def _unchanged(self, identity: str | None) -> None:
        if self.identity() != identity:
            raise changed_error(self.path)

    def changed(self, count: int) -> InputFormatError:
        """A file that grew changed as any other change does."""
        return changed_error(self.path)

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """The file's records (`_records`), the file checked before and after: a record
        that cannot be read now is blamed on a change when the file changed (the scan
        read it: a file cut short leaves a cut line, which is not the line's fault)."""
        # The identity a read must see throughout: the scanned one, else the present.
        identity = self.identity() if self.expected is None else self.expected
        self._unchanged(identity)
        try:
            yield from self._records(shard)
        except InputFormatError:
            if self.identity() != identity:
                raise changed_error(self.path) from None
            raise
        self._unchanged(identity)

    @abstractmethod
    def _records(self, shard: Shard | None) -> Iterator[tuple[int, dict[str, Any]]]:
        """`read` of the format, the file's identity left to `read`."""

    def _scanning(self) -> str | None:
        """The identity a scan must see throughout, kept for the reads after it."""
        self.expected = self.identity()
        return self.expected

    def _cannot(self, exc: Exception) -> InputFormatError:
        return cannot_read(self.path, exc)


class JsonLinesRecords(FileRecords):
    """The records of a JSON-lines file: the pre-pass parses every line (refusing the file
    as `load_rows` does) and keeps only the names and the count; a read parses the lines
    it gives, and a shard's read finds its lines by counting the others at the byte level,
    without decoding them."""

    def scan(self) -> tuple[list[str], int]:
        """Every line parsed once, as `load_rows` reads the file."""
        identity = self._scanning()
        names: dict[str, None] = {}
        count = 0
        for number, line in jsonl_lines(self.path):
            if line.strip():
                names.update(dict.fromkeys(json_record(line, self.path, number)))
                count += 1
        self._unchanged(identity)
        return list(names), count

    def _records(self, shard: Shard | None) -> Iterator[tuple[int, dict[str, Any]]]:
        """The records of the lines, the blank ones skipped (as `load_rows` does)."""
        number = 0
        with self.path.open("rb") as handle:
            for line, raw in universal_lines(handle, self.path):
                if _held(shard, number):
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise InputFormatError(f"{self.path}:{line}: not UTF-8 ({exc})") from None
                    if not text.strip():
                        continue
                    yield number, json_record(text, self.path, line)
                elif _blank(raw):
                    continue
                number += 1


def _blank(raw: bytes) -> bool:
    """Whether a line is blank as `str.strip` sees it, decoded only when its bytes leave
    it open (a line of Unicode spaces): a line of a JSON object starts with "{"."""
    stripped = raw.strip()
    if not stripped:
        return True
    if stripped[:1] == b"{":
        return False
    return not raw.decode("utf-8", "replace").strip()


class CsvRecords(FileRecords):
    """The records of a CSV file, every cell text, parsed in chunks by pandas."""

    def _chunks(self) -> Iterator[Any]:
        import pandas

        try:
            with pandas.read_csv(
                self.path, keep_default_na=False, dtype=str, chunksize=BATCH
            ) as chunks:
                yield from chunks
        except InputFormatError:
            raise
        except Exception as exc:  # not parseable, not found
            raise self._cannot(exc) from exc

    def scan(self) -> tuple[list[str], int]:
        """The header's names, and the records counted by parsing them all."""
        identity = self._scanning()
        names: list[str] = []
        count = 0
        for chunk in self._chunks():
            names = names or list(chunk.columns)
            count += len(chunk)
        self._unchanged(identity)
        return names, count

    def _records(self, shard: Shard | None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each record as `DataFrame.to_dict(orient="records")` gives it; a shard's alone
        are converted."""
        start = 0
        for chunk in self._chunks():
            numbers = [n for n in range(start, start + len(chunk)) if _held(shard, n)]
            taken = chunk if shard is None else chunk.iloc[[n - start for n in numbers]]
            yield from zip(numbers, taken.to_dict(orient="records"), strict=True)
            start += len(chunk)


class ParquetRecords(FileRecords):
    """The records of a Parquet file, read a batch of a row group at a time by pyarrow;
    the names and the count come from the file's metadata, with no pre-pass."""

    def _file(self) -> Any:
        import pyarrow.parquet

        try:
            return pyarrow.parquet.ParquetFile(self.path)
        except Exception as exc:  # not Parquet
            raise self._cannot(exc) from exc

    def scan(self) -> tuple[list[str], int]:
        """The schema's names and the metadata's row count."""
        self._scanning()
        parquet = self._file()
        return list(dict.fromkeys(parquet.schema_arrow.names)), parquet.metadata.num_rows

    def _records(self, shard: Shard | None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each record as `datasets` reads it (`Table.to_pylist`); a shard's alone are
        converted."""
        import pyarrow

        start = 0
        try:
            for batch in self._file().iter_batches(batch_size=BATCH):
                size = batch.num_rows
                numbers = [n for n in range(start, start + size) if _held(shard, n)]
                if shard is not None:
                    batch = batch.take(pyarrow.array([n - start for n in numbers], pyarrow.int64()))
                yield from zip(numbers, batch.to_pylist(), strict=True)
                start += size
        except InputFormatError:
            raise
        except Exception as exc:  # a damaged row group
            raise self._cannot(exc) from exc


class ConversationRecords(Records):
    """The turns of an input whose records are conversations (`judge.conversations`): one
    record per assistant turn, numbered on across conversations; a turn's unit is its
    conversation's record number. A shard reads every conversation (its rows' numbers are
    known only once the conversations before are read)."""

    unit = "conversation"

    def __init__(self, inner: Records):
        self.inner = inner
        self.source = inner.source

    def scan(self) -> tuple[list[str], int]:
        """Every turn record's names, and the turns counted."""
        self.inner.scan()  # refuses an unreadable input as before, and keeps its identity
        names: dict[str, None] = {}
        count = 0
        for _, record in conversation_rows(self.inner.read()):
            names.update(dict.fromkeys(record))
            count += 1
        return list(names), count

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """The turn records the shard holds."""
        for number, _, record in self.read_units(shard):
            yield number, record

    def read_units(self, shard: Shard | None = None) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(row number, conversation's record number, turn record) of the turns the shard
        holds."""
        number = 0
        # Every shard reads every conversation, so each knows the ids before its own.
        ids = DistinctIds()
        for position, conversation in self.inner.read():
            for record in ids.turn_records(conversation, position):
                if _held_turn(shard, number, position):
                    yield number, position, record
                number += 1

    def identity(self) -> str | None:
        """The identity of the input the conversations are read from."""
        return self.inner.identity()


class FlatTurnRecords(Records):
    """The rows of a table whose rows are turns (conversation_id and turn columns), each
    with its history from the earlier turns of its conversation: the table is held whole,
    since a turn's earlier turns may be anywhere in it."""

    unit = "conversation"

    def __init__(self, inner: Records, columns: Mapping[str, str] | None = None):
        self.inner = inner
        self.source = inner.source
        self.columns = columns  # field -> column: where earlier turns' fields are read
        self._rows: list[dict[str, Any]] | None = None
        self._units: list[int] = []

    def _all(self) -> list[dict[str, Any]]:
        if self._rows is None:
            table = [record for _, record in self.inner.read()]
            self._rows = flat_turn_records(table, self.columns)
            self._units = flat_turn_units(table)
        return self._rows

    def scan(self) -> tuple[list[str], int]:
        """The table's names and `history`, and its rows."""
        names, count = self.inner.scan()
        return [*names, "history"], count

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Each row with its history, those the shard holds."""
        for number, _, record in self.read_units(shard):
            yield number, record

    def read_units(self, shard: Shard | None = None) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(row number, its conversation's first row number, row with its history) of the
        rows the shard holds."""
        rows = self._all()
        for number, (unit, record) in enumerate(zip(self._units, rows, strict=True)):
            if _held_turn(shard, number, unit):
                yield number, unit, record

    def identity(self) -> str | None:
        """The identity of the table."""
        return self.inner.identity()


class PlacedRecords(Records):
    """The rows of an input whose rows give their own place in a conversation (their
    conversation_id and turn, and their history), each place once (`distinct_turns`: a
    row at an earlier row's place is an error row naming it). A shard reads every row, as
    the places before its own may be in any shard, and keeps its own."""

    def __init__(self, inner: Records, columns: Mapping[str, str]):
        self.inner = inner
        self.source = inner.source
        self.columns = columns  # field -> column: where the rows' places are read

    def scan(self) -> tuple[list[str], int]:
        """The input's names and rows."""
        return self.inner.scan()

    def read(self, shard: Shard | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """The rows the shard holds, each place once."""
        for number, record in distinct_turns(self.inner.read(), self.columns):
            if _held(shard, number):
                yield number, record

    def identity(self) -> str | None:
        """The identity of the input."""
        return self.inner.identity()

    def changed(self, count: int) -> InputFormatError:
        """The input's own error for a read of more rows than scanned."""
        return self.inner.changed(count)


def as_conversations(
    records: Records, names: Sequence[str], columns: Mapping[str, str] | None = None
) -> Records | None:
    """The records as turns when the input holds conversations (its first record is one)
    or is a flat table of turns (`names`, its column names, say so; `columns`, field ->
    column as resolved, names the columns its earlier turns are read from); else None."""
    if is_flat_turns(names):
        return FlatTurnRecords(records, columns)
    if not any(key in names for key in CONVERSATION_KEYS):  # no record can be one
        return None
    first = next(iter(records.read()), None)
    if first is not None and is_conversation(first[1]):
        return ConversationRecords(records)
    return None


def records_of(data: Any) -> Records:
    """The records of any input `load_rows` takes, not yet read; refused as `load_rows`
    refuses it (no such file, a type judge does not read, a DatasetDict); `Records` are
    taken as they are (`judge experiment --dry-run`'s, made from a test set)."""
    if isinstance(data, Records):
        return data
    if isinstance(data, (str, os.PathLike)):
        text = os.fspath(data)
        if isinstance(text, str) and text.startswith(HUB):
            return DatasetRecords(dataset_of_hub(text), text)
        path, kind = checked_path(text)
        if path.suffix.lower() == ".jsonl":
            return JsonLinesRecords(path)
        if kind == "csv":
            return CsvRecords(path)
        if kind == "parquet" and not _has_features(path):
            return ParquetRecords(path)
        if kind == "json":  # one JSON document: parsed whole, as it always was
            records, source = read_records(path)
            return ListRecords(records, source)
        try:  # a saved dataset folder, or a Parquet file of datasets' features
            return DatasetRecords(dataset_of_file(path, kind), str(path))
        except Exception as exc:
            raise cannot_read(path, exc) from exc
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return FrameRecords(data)
    if module == "datasets" and type(data).__name__ != "DatasetDict":
        return DatasetRecords(data)
    if isinstance(data, list):  # held already: its items are copied as they are read
        if not all(isinstance(r, Mapping) for r in data):
            raise InputFormatError("a list input must hold one dict per sample")
        return ListRecords(data, f"list of {len(data)} dicts")
    records, source = read_records(data)  # refuses any other type, naming those it takes
    return ListRecords(records, source)


def _has_features(path: Path) -> bool:
    """Whether a Parquet file records `datasets` features (images, audio, class labels...),
    which `datasets` alone decodes as judge always read them: such a file is read through
    it. A file pyarrow cannot read is too, so its error is the one it always was."""
    import pyarrow.parquet

    try:
        metadata = pyarrow.parquet.read_schema(path).metadata or {}
    except Exception:
        return True
    return b"huggingface" in metadata


class InputRows:
    """The rows of an input, built from its records each time they are iterated, in order
    (`judge.run.data.Row`, numbered by position); `len` is the number of rows.

    Attributes:
        records: where the rows are read from.
        columns: field -> column, resolved from every column name.
        names: every column name of the input.
        source: the input as summary.json names it.
    """

    def __init__(
        self, records: Records, columns: Mapping[str, str], names: Sequence[str], count: int
    ):
        self.records = records
        self.columns = dict(columns)
        self.names = list(names)
        self.source = records.source
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Row]:
        return self.only(None)

    def only(self, shard: Shard | None) -> Iterator[Row]:
        """The rows a shard holds (every row for None), the others not built; each row
        knows its unit (`Row.unit`) when the input splits by conversation."""
        by_row = self.records.unit == "row"
        for number, unit, record in self.records.read_units(shard):
            if number >= self._count:
                # Rows appended since the pre-pass: refused before one is judged, as the
                # row count (a shard's size, the tally, the data hash) is the scanned one.
                raise self.records.changed(self._count)
            row = build_rows([record], self.columns, [number])[0]
            if not by_row:
                row.unit = unit
            yield row

    @property
    def unit(self) -> str:
        """What a shard of this input splits on: "row", or "conversation" for turns."""
        return self.records.unit

    def shard_of(self, shard: Shard | None) -> Shard | None:
        """The shard as this input is split: by conversation for turns of conversations."""
        if shard is None or shard.unit == self.unit:
            return shard
        return Shard(shard.index, shard.count, self.unit)

    def units(self) -> int:
        """How many units (rows, or conversations) a shard can be given, counted in a pass
        of their own for conversations."""
        if self.unit == "row":
            return len(self)
        return 1 + max((unit for _, unit, _ in self.records.read_units()), default=-1)

    def numbers(self, shard: Shard) -> Iterator[int]:
        """The numbers of the rows the shard holds, in order, without building them."""
        for number, _, _ in self.records.read_units(shard):
            yield number

    def ids(self) -> Iterator[Any]:
        """Each row's id as its result will carry it (results.jsonl's `id`: the id column's
        text, else the row's number), in order: the rows are built one at a time and
        dropped, so a pass holds none of them."""
        for row in self:
            yield row.sample.id if row.sample is not None else row.id

    def extra_columns(self) -> list[str]:
        """The columns no field reads: a sample's `extra` (custom prompts' variables)."""
        used = set(self.columns.values())
        return [name for name in self.names if name not in used]

    def data_sha256(self) -> str:
        """The hash of every row's inputs, in order (`judge.run.plan.data_digest`), read
        in a pass of its own: for a plan that must hold it before any row is judged."""
        digest = DataDigest()
        for row in self:
            digest.add(row)
        return digest.hexdigest(len(self))


def open_input(data: Any, column_map: Mapping[str, str] | None = None) -> InputRows:
    """The rows of any input `judge.evaluate` takes, after the pre-pass (names, count, every
    record readable); the rows themselves are read when iterated.

    Args:
        data: a `datasets.Dataset`, a list of dicts, a pandas DataFrame, or a path (.jsonl,
            .json, .csv, .parquet, a saved dataset folder, hf://owner/name[:split]).
        column_map: `{field: column}` for columns with other names.

    Raises:
        judge.errors.InputFormatError: as `judge.run.data.load_rows` raises it.
    """
    records = records_of(data)
    names, count = records.scan()
    flat = None  # a flat table's earlier turns are read from the columns the user maps
    if count and is_flat_turns(names):
        flat = resolve_columns([*names, "history"], column_map, records.source)
    turns = as_conversations(records, names, flat) if count else None
    if turns is not None:
        records = turns
        names, count = records.scan()
    if not count:
        raise InputFormatError(f"{records.source}: no rows to evaluate")
    columns = resolve_columns(names, column_map, records.source)
    if turns is None and has_places(columns):
        records = PlacedRecords(records, columns)
    return InputRows(records, columns, names, count)


def reopen_input(
    data: Any, columns: Mapping[str, str], count: int, identity: str | None
) -> InputRows:
    """The rows of an input scanned by another process (`open_input` there), with no
    pre-pass here: its columns and count as that process found them.

    Raises:
        judge.errors.InputFormatError: the input is not the one scanned (`identity`).
    """
    records = records_of(data)
    if isinstance(records, FileRecords):
        records.expected = identity
    if records.identity() != identity:
        raise InputFormatError(
            f"{records.source} changed while the run was starting: its rows are not those "
            "the run was planned on; run the command again"
        )
    turns = None
    if "history" in columns:  # turns, of conversations or of a flat table: which, says a record
        first = next(iter(records.read()), None)
        turns = as_conversations(records, list(first[1]) if first else [], columns)
    if turns is None and has_places(columns):
        turns = PlacedRecords(records, columns)
    return InputRows(turns or records, columns, [], count)
