"""A projector write as ONE statement: the entity rows, the audit rows and the position.

A transaction of separate statements costs a round trip each (BEGIN, the position
lock, one per table, the position, COMMIT). When a write holds rows of the entity
and audit tables only (what job submissions and job lifecycle events write), it
goes as one statement: data-modifying CTEs insert each table's rows from arrays
(`unnest`, one array per column) only if the position moves forward, and the
main query notifies. The `UPDATE ... WHERE seq < $new` takes the row lock that
the transaction path takes with `SELECT ... FOR UPDATE`; a concurrent writer of
the same position waits on it, then finds the position moved and writes nothing.
One statement is one transaction: all of it commits, or none of it.

Configuration rows (environments, policies, queues, shares, deletes) keep the
transaction path: their `created_at` is kept across updates, and they are rare.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from quartermaster.store.rows import Row, Writes

_encoder = msgspec.json.Encoder()


class Column(NamedTuple):
    name: str
    type: str  # the column's SQL type; jsonb travels as text, text[] as a JSON list


class Table(NamedTuple):
    name: str  # also the `Writes` attribute holding its rows
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # the conflict target
    update: bool  # on conflict: update every other column (else do nothing)


def _columns(spec: str) -> tuple[Column, ...]:
    return tuple(Column(*item.split(":")) for item in spec.split())


TABLES = (
    Table(
        "jobs",
        _columns(
            "job_id:text job_name:text job_queue:text quota_share:text status:text "
            "status_reason:text scheduling_priority:integer created_at:float8 "
            "updated_seq:bigint summary:jsonb doc:jsonb"
        ),
        ("job_id",),
        True,
    ),
    Table(
        "attempts",
        _columns(
            "job_id:text attempt:integer hosts:text[] dispatched_at:float8 started_at:float8 "
            "stopped_at:float8 status_reason:text exit_code:integer"
        ),
        ("job_id", "attempt"),
        True,
    ),
    Table(
        "pools",
        _columns("job_id:text status:text job_queue:text updated_seq:bigint doc:jsonb"),
        ("job_id",),
        True,
    ),
    Table("hosts", _columns("host_id:text updated_seq:bigint doc:jsonb"), ("host_id",), True),
    Table(
        "audit",
        _columns(
            "seq:bigint idx:integer subject:text type:text at:float8 body:jsonb principal:text"
        ),
        ("seq", "idx"),
        False,
    ),
)
_OTHERS = (
    "environments",
    "policies",
    "queues",
    "shares",
    "share_deletes",
    "environment_deletes",
    "policy_deletes",
    "queue_deletes",
)
# Parameters before the tables' arrays: name, seq, at, channel, payload.
_FIRST_ARRAY = 6


def fits(writes: Writes) -> bool:
    """Whether `writes` holds only rows of tables the one statement writes."""
    return not any(getattr(writes, name) for name in _OTHERS)


def statement(schema: str, tables: Sequence[Table]) -> str:
    """The statement writing `tables` (those with rows) and moving the position.

    It returns one row (the notification) when the position moved and the rows
    were written, none when the stored position was already at or past the new one.
    """
    ctes = [
        f"moved AS (UPDATE {schema}.projection_position SET seq = $2, at = $3 "
        "WHERE name = $1 AND seq < $2 RETURNING seq)"
    ]
    number = _FIRST_ARRAY
    for table in tables:
        arrays, picks = [], []
        for column in table.columns:
            if column.type in ("jsonb", "text[]"):
                arrays.append(f"${number}::text[]")
            else:
                arrays.append(f"${number}::{column.type}[]")
            number += 1
            if column.type == "jsonb":
                picks.append(f"r.{column.name}::jsonb")
            elif column.type == "text[]":
                picks.append(f"ARRAY(SELECT jsonb_array_elements_text(r.{column.name}::jsonb))")
            else:
                picks.append(f"r.{column.name}")
        names = ", ".join(c.name for c in table.columns)
        if table.update:
            sets = ", ".join(
                f"{c.name} = EXCLUDED.{c.name}" for c in table.columns if c.name not in table.key
            )
            conflict = f"ON CONFLICT ({', '.join(table.key)}) DO UPDATE SET {sets}"
        else:
            conflict = "ON CONFLICT DO NOTHING"
        ctes.append(
            f"w_{table.name} AS (INSERT INTO {schema}.{table.name} ({names}) "
            f"SELECT {', '.join(picks)} FROM unnest({', '.join(arrays)}) AS r({names}) "
            f"WHERE EXISTS (SELECT FROM moved) {conflict})"
        )
    return f"WITH {', '.join(ctes)} SELECT pg_notify($4, $5) FROM moved"


def arguments(tables: Sequence[Table], writes: Writes) -> list[list[object]]:
    """The arrays of `tables`' rows in `writes`, column by column, in statement order."""
    out: list[list[object]] = []
    for table in tables:
        rows: list[Row] = getattr(writes, table.name)
        for index, column in enumerate(table.columns):
            values = [row[index] for row in rows]
            if column.type == "text[]":
                values = [_encoder.encode(value).decode() for value in values]
            out.append(values)
    return out


def tables_of(writes: Writes) -> tuple[Table, ...]:
    return tuple(t for t in TABLES if getattr(writes, t.name))
