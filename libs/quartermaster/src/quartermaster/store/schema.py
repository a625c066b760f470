"""Tables of the read model, created idempotently in a schema of the caller's choice.

Every row is a document shaped as its gRPC message (see `documents`), next to the
few columns that lists filter and page on. `projection_position` is the tracking
record: a projector writes its position in the same transaction as its rows.
"""

from __future__ import annotations

import re
from typing import Any

from quartermaster.store.errors import InvalidSchemaNameError

# Room is left for the notification channel name (Postgres identifiers: 63 bytes).
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")

_TABLES = """
CREATE TABLE IF NOT EXISTS {s}.jobs (
    job_id              text PRIMARY KEY,
    job_name            text NOT NULL,
    job_queue           text NOT NULL,
    quota_share         text NOT NULL,
    status              text NOT NULL,
    status_reason       text NOT NULL DEFAULT '',
    scheduling_priority integer NOT NULL,
    created_at          double precision NOT NULL,
    updated_seq         bigint NOT NULL,
    summary             jsonb NOT NULL,
    doc                 jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_queue_status_created
    ON {s}.jobs (job_queue, status, created_at, job_id);
CREATE INDEX IF NOT EXISTS jobs_queue_created ON {s}.jobs (job_queue, created_at, job_id);
CREATE INDEX IF NOT EXISTS jobs_name ON {s}.jobs (job_name text_pattern_ops);
-- JOB_NAME matches as AWS: case-insensitive, a trailing * is a prefix
CREATE INDEX IF NOT EXISTS jobs_name_lower
    ON {s}.jobs (job_queue, lower(job_name) text_pattern_ops);
CREATE INDEX IF NOT EXISTS jobs_front
    ON {s}.jobs (job_queue, scheduling_priority DESC, created_at, job_id)
    WHERE status = 'RUNNABLE';
CREATE INDEX IF NOT EXISTS jobs_share_front
    ON {s}.jobs (job_queue, quota_share, scheduling_priority DESC, created_at, job_id)
    WHERE status = 'RUNNABLE';

CREATE TABLE IF NOT EXISTS {s}.attempts (
    job_id        text NOT NULL,
    attempt       integer NOT NULL,
    hosts         text[] NOT NULL,
    dispatched_at double precision NOT NULL,
    started_at    double precision,
    stopped_at    double precision,
    status_reason text NOT NULL DEFAULT '',
    exit_code     integer,
    PRIMARY KEY (job_id, attempt)
);

CREATE TABLE IF NOT EXISTS {s}.environments (
    name        text PRIMARY KEY,
    created_at  double precision NOT NULL,
    updated_seq bigint NOT NULL,
    doc         jsonb NOT NULL
);

CREATE TABLE IF NOT EXISTS {s}.policies (
    name        text PRIMARY KEY,
    created_at  double precision NOT NULL,
    updated_seq bigint NOT NULL,
    doc         jsonb NOT NULL
);

CREATE TABLE IF NOT EXISTS {s}.queues (
    name        text PRIMARY KEY,
    created_at  double precision NOT NULL,
    updated_seq bigint NOT NULL,
    doc         jsonb NOT NULL
);

CREATE TABLE IF NOT EXISTS {s}.shares (
    job_queue      text NOT NULL,
    name           text NOT NULL,
    created_at     double precision NOT NULL,
    updated_seq    bigint NOT NULL,
    oversubscribed boolean NOT NULL,
    capacity_usage jsonb NOT NULL,
    doc            jsonb NOT NULL,
    PRIMARY KEY (job_queue, name)
);

CREATE TABLE IF NOT EXISTS {s}.pools (
    job_id      text PRIMARY KEY,
    status      text NOT NULL,
    job_queue   text NOT NULL,
    updated_seq bigint NOT NULL,
    doc         jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS pools_queue_status ON {s}.pools (job_queue, status, job_id);
CREATE INDEX IF NOT EXISTS pools_status ON {s}.pools (status, job_id);

CREATE TABLE IF NOT EXISTS {s}.hosts (
    host_id     text PRIMARY KEY,
    updated_seq bigint NOT NULL,
    doc         jsonb NOT NULL
);

CREATE TABLE IF NOT EXISTS {s}.audit (
    seq     bigint NOT NULL,
    idx     integer NOT NULL,
    subject text NOT NULL,
    type    text NOT NULL,
    at      double precision NOT NULL,
    body    jsonb NOT NULL,
    PRIMARY KEY (seq, idx)
);
-- who asked, for request events (indexed: "everything team-a's admin did")
ALTER TABLE {s}.audit ADD COLUMN IF NOT EXISTS principal text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS audit_principal ON {s}.audit (principal) WHERE principal <> '';

CREATE TABLE IF NOT EXISTS {s}.projection_position (
    name text PRIMARY KEY,
    seq  bigint NOT NULL DEFAULT 0,
    at   double precision NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS {s}.client_tokens (
    token        text PRIMARY KEY,
    job_queue    text NOT NULL,
    request_hash text NOT NULL,
    job_id       text NOT NULL,
    created_at   double precision NOT NULL DEFAULT extract(epoch FROM now())
);
"""


def checked(schema: str) -> str:
    """`schema` if it is a plain lowercase identifier (it is spliced into SQL)."""
    if not _SCHEMA_NAME.match(schema):
        raise InvalidSchemaNameError(
            f"schema name {schema!r} is not a lowercase identifier of at most 48 characters"
        )
    return schema


def channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel on which projectors announce their committed position."""
    return f"{checked(schema)}_position"


def ddl(schema: str) -> str:
    s = checked(schema)
    return f"CREATE SCHEMA IF NOT EXISTS {s};\n" + _TABLES.format(s=s)


async def create_schema(pool: Any, schema: str) -> None:
    """Create the schema and its tables if missing; safe to run concurrently."""
    statements = ddl(schema)
    async with pool.acquire() as conn, conn.transaction():
        # Concurrent CREATE ... IF NOT EXISTS can still collide in the catalog.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"qm.store.{schema}")
        await conn.execute(statements)
