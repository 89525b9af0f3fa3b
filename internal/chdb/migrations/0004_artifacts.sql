-- The files of every node attempt brought into the run directory (phase
-- logs, declared outputs, plots): path is relative to the run directory.
CREATE TABLE IF NOT EXISTS artifacts (
  run String, node String, attempt UInt32, kind String, name String, path String, bytes UInt64, sha256 String,
  ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY (run, node, attempt, kind, name);
