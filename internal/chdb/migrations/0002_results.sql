-- The results tables: what users query (docs/results.md). The SQLite file of
-- a local run has the same tables with the same columns (pkg/results).
-- runs and nodes keep a row per state change; ReplacingMergeTree(ts_ms)
-- keeps the last one per key (query with FINAL, or argMax(..., ts_ms)).

CREATE TABLE IF NOT EXISTS runs (
  run String, status String, title String, mode String, config String, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY run;

CREATE TABLE IF NOT EXISTS nodes (
  run String, node String, parent String, stage UInt32, kind String, pool String, attempt UInt32,
  status String, error_kind String, metric_name String, metric_value Float64, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY (run, node);

-- One row per phase a worker ran: compiler is the program of the first
-- compile command (gcc, clang, mpicc, nvcc, make, ...), on every row of
-- the node.
CREATE TABLE IF NOT EXISTS phase_runs (
  run String, node String, attempt UInt32, worker String, phase String, status String, exit_code Int32,
  duration_ms Float64, compiler String, error_kind String, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY (run, node, attempt, phase);

CREATE TABLE IF NOT EXISTS metrics (
  run String, node String, attempt UInt32, name String, value Float64, unit String, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY (run, node, attempt, name);

-- call_id is unique per request: two calls in one millisecond stay two rows.
CREATE TABLE IF NOT EXISTS llm_calls (
  run String, node String, call_id String, purpose String, model String, tokens_in UInt64, tokens_out UInt64,
  latency_ms Float64, cost_usd Float64, cache_hit UInt8, error String, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY (run, node, call_id);
