-- A node's metric's limit on the host that measured it (its peak FLOP/s or
-- memory bandwidth, docs/evaluation.md "The machine's bound"), in the
-- metric's unit: NULL when the run's metric has none.
ALTER TABLE nodes ADD COLUMN metric_bound Nullable(Float64);
