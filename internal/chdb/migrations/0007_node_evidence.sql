-- Who measured a node's metric and how it held on inputs the search never
-- saw (docs/evaluation.md): metric_from is "evaluator" when the idea's
-- harness measured metric_value ("" when the program reported it of
-- itself), self_reported what the program said beside it; held_out is the
-- node's verdict at the held-out gate (held, overfit, incorrect, failed;
-- "" when not gated) and held_out_metric its metric there. One column a
-- statement (see 0005).
ALTER TABLE nodes ADD COLUMN metric_from String DEFAULT '';
ALTER TABLE nodes ADD COLUMN self_reported Nullable(Float64);
ALTER TABLE nodes ADD COLUMN held_out String DEFAULT '';
ALTER TABLE nodes ADD COLUMN held_out_metric Nullable(Float64);
