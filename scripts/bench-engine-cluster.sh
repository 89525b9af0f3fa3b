#!/usr/bin/env bash
# bench-engine-cluster.sh BIN: the engine benchmark in cluster mode, for
# `make bench-engine-cluster`: a nats-server, Redis and ClickHouse started
# here on private loopback ports (stopped by their pids at the end), the
# run's memory in Redis and ClickHouse and its results in ClickHouse, as a
# scheduler with HPCQ_REDIS_URL and HPCQ_CLICKHOUSE_DSN keeps them. Prints
# the bench-engine lines (ending "store=redis+clickhouse nats=server") and,
# per size, the CPU seconds each server spent meanwhile.
set -euo pipefail
bin=$1
sizes=${BENCH_ENGINE_NODES:-1000,10000}
here=$(cd "$(dirname "$0")" && pwd)

svc=$(mktemp -d -t hpcq-bench-engine-XXXXXX)
trap '"$here/services.sh" down "$svc" nats redis clickhouse >/dev/null 2>&1 || true; rm -rf "$svc"' EXIT
"$here/services.sh" install nats redis clickhouse
"$here/services.sh" up "$svc" nats redis clickhouse >/dev/null
set -a
# shellcheck disable=SC1091
. "$svc/services.env"
set +a

# cpu PID: the process's CPU time in clock ticks (user + system).
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
for n in ${sizes//,/ }; do
  before=("$(cpu "$HPCQ_NATS_PID")" "$(cpu "$HPCQ_REDIS_PID")" "$(cpu "$HPCQ_CLICKHOUSE_PID")")
  "$bin" -nodes "$n" -store redis+clickhouse -nats "$HPCQ_NATS_URL"
  after=("$(cpu "$HPCQ_NATS_PID")" "$(cpu "$HPCQ_REDIS_PID")" "$(cpu "$HPCQ_CLICKHOUSE_PID")")
  awk -v n="$n" -v hz="$hz" -v a="${before[*]}" -v b="${after[*]}" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    printf "bench-engine-servers nodes=%d nats_cpu_s=%.1f redis_cpu_s=%.1f clickhouse_cpu_s=%.1f\n", n, (y[1]-x[1])/hz, (y[2]-x[2])/hz, (y[3]-x[3])/hz }'
done
