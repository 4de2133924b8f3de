"""Which column of a table holds each field: one resolution for every reader of rows.

A reader describes its fields in a `FieldTable`: each field's name, the column names
recognised for it (in order of preference), whether the input must have it and how a user
maps a column of another name to it, plus the wording of the two mapping errors. Evaluation
data (`judge.run.data`) and test-set corpora (`judge.testset.corpus`) both resolve their
columns with `FieldTable.resolve`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from judge.errors import InputFormatError


@dataclass(frozen=True)
class Field:
    """A field: its name, the column names recognised for it in order of preference,
    whether it is required, and how to map a column to it (said when it is missing)."""

    name: str
    names: tuple[str, ...]
    required: bool = False
    hint: str = ""
    # Column names that often hold the field but are never taken for it unmapped (`docs`
    # may hold ids): the mapping suggested when one is present.
    synonyms: tuple[str, ...] = ()


@dataclass(frozen=True)
class FieldTable:
    """The fields a reader knows and how it words a bad mapping.

    Args:
        fields: the fields, in the order they are tried and listed.
        unknown_field: the error for a mapping of a field not in the table, formatted
            with `field` (the name given) and `fields` (the known names, comma-separated).
        absent_column: the error for a mapping to a column the data lacks, formatted
            with `column` (the name given) and `columns` (those present, comma-separated).
        mapping: how a user maps a column to a field, formatted with `field` and `column`
            (the column's name quoted): the hint suggested for a present synonym.
    """

    fields: tuple[Field, ...]
    unknown_field: str
    absent_column: str
    mapping: str = ""

    def __getitem__(self, name: str) -> Field:
        """The field of that name (KeyError if there is none)."""
        for fld in self.fields:
            if fld.name == name:
                return fld
        raise KeyError(name)

    def resolve(
        self, present: Iterable[str], column_map: Mapping[str, str] | None, source: str = ""
    ) -> dict[str, str]:
        """field -> column: the user's mapping first, then the first recognised column
        present for each other field; an `InputFormatError` for a bad mapping or a missing
        required field.

        Args:
            present: the column names of the data.
            column_map: field -> column, for columns under other names.
            source: the data's name, put before each error ("" for none).
        """
        columns = list(present)
        where = f"{source}: " if source else ""
        known = [f.name for f in self.fields]
        chosen: dict[str, str] = {}
        for name, column in (column_map or {}).items():
            if name not in known:
                message = self.unknown_field.format(field=name, fields=", ".join(known))
                raise InputFormatError(where + message)
            if column not in columns:
                message = self.absent_column.format(column=column, columns=", ".join(columns))
                raise InputFormatError(where + message)
            chosen[name] = column
        for fld in self.fields:
            found = next((c for c in fld.names if c in columns), None)
            if fld.name not in chosen and found is not None:
                chosen[fld.name] = found
        for fld in self.fields:
            if fld.required and fld.name not in chosen:
                raise InputFormatError(where + self.no_column(fld.name, columns))
        return chosen

    def no_column(self, name: str, present: Iterable[str]) -> str:
        """Why the field of that name has no column: the names looked for, the columns
        present, and how to map one (a present synonym's mapping, when there is one)."""
        fld = self[name]
        columns = list(present)
        synonym = next((c for c in fld.synonyms if c in columns), None)
        hint = fld.hint
        if self.mapping and (synonym is not None or not hint):
            shown = repr(synonym) if synonym is not None else "..."
            hint = self.mapping.format(field=repr(name), column=shown)
        return (
            f"no {name} column (looked for {', '.join(fld.names)}; columns: "
            f"{', '.join(columns) or 'none'}); map yours with {hint}"
        )


def cell_list(value: Any) -> Any:
    """A list field's value as read: a CSV cell holds its list as JSON text, parsed here (a
    blank cell is no items); any other value as it is. Raises ValueError (a
    json.JSONDecodeError) for text that is not JSON."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else []
    return value
