#!/bin/sh
# Start Postgres as the postgres user. On the first start (no $PGDATA/PG_VERSION) create the
# cluster: superuser POSTGRES_USER with POSTGRES_PASSWORD (scram-sha-256 over TCP), database
# POSTGRES_DB. Then run the server in the foreground (it stops cleanly on SIGTERM, as PID 1).
#
#   POSTGRES_PASSWORD (required on first start)  POSTGRES_USER (postgres)  POSTGRES_DB (quartermaster)
#   PGPORT (5432)  POSTGRES_LISTEN_ADDRESSES (*)  further args: extra server flags (-c name=value)
set -eu

: "${PGDATA:=/var/lib/postgresql/data/pgdata}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=quartermaster}"
: "${PGPORT:=5432}"
: "${POSTGRES_LISTEN_ADDRESSES:=*}"
export PGDATA PGPORT

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "qm-postgres: POSTGRES_PASSWORD is required to create the cluster in $PGDATA" >&2
        exit 2
    fi
    mkdir -p "$PGDATA"
    chmod 0700 "$PGDATA"
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    # Clients come from other hosts and pods: password auth from anywhere, never trust.
    printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' \
        >>"$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
        echo "CREATE DATABASE \"$POSTGRES_DB\";" | postgres --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "qm-postgres: created cluster $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)" >&2
fi
exec postgres -D "$PGDATA" -p "$PGPORT" -c listen_addresses="$POSTGRES_LISTEN_ADDRESSES" \
    -c unix_socket_directories=/tmp "$@"
