#!/usr/bin/env bash
# bench-memory.sh BIN TRACE_DIR: the memory benchmark of `make bench-memory`.
# Each configuration runs in a fresh process against a fresh store: the two
# traces on SQLite, then on Redis + ClickHouse (started here on private
# loopback ports, stopped by their pids at the end), then the archival
# benchmark (BENCH_ARCHIVAL_DOCS texts, default one million) and the
# repeated-lesson one (BENCH_REPEATS siblings, default 10,000) on both.
set -euo pipefail
bin=$1 dir=$2
docs=${BENCH_ARCHIVAL_DOCS:-1000000}
repeats=${BENCH_REPEATS:-10000}
here=$(cd "$(dirname "$0")" && pwd)

"$bin" -trace base -dir "$dir"
"$bin" -trace 10x -dir "$dir"

svc=$(mktemp -d -t hpcq-bench-services-XXXXXX)
trap '"$here/services.sh" down "$svc" redis clickhouse >/dev/null 2>&1 || true; rm -rf "$svc"' EXIT
"$here/services.sh" install redis clickhouse
"$here/services.sh" up "$svc" redis clickhouse >/dev/null
set -a
# shellcheck disable=SC1091
. "$svc/services.env"
set +a
"$bin" -trace base -store redis+clickhouse -dir "$dir"
"$bin" -trace 10x -store redis+clickhouse -dir "$dir"

"$bin" -archival "$docs" -store sqlite
"$bin" -archival "$docs" -store redis+clickhouse
"$bin" -repeats "$repeats" -store sqlite
"$bin" -repeats "$repeats" -store redis+clickhouse
