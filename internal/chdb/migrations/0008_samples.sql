-- Every measured repeat of a node's evaluation (the idea's harness), and
-- the spread of the metric made of them (docs/results.md): the nodes row's
-- quartiles and 95% bootstrap interval. One column a statement (see 0005).
CREATE TABLE IF NOT EXISTS samples (
  run String, node String, attempt UInt32, stage String, input String, repeat UInt32, value Nullable(Float64), unit String,
  correct UInt8, worker String, host String, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree(ts_ms) ORDER BY (run, node, attempt, stage, input, repeat);
ALTER TABLE nodes ADD COLUMN metric_q1 Nullable(Float64);
ALTER TABLE nodes ADD COLUMN metric_q3 Nullable(Float64);
ALTER TABLE nodes ADD COLUMN metric_low Nullable(Float64);
ALTER TABLE nodes ADD COLUMN metric_high Nullable(Float64);
