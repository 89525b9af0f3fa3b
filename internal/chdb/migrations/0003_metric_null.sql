-- A node without a value of its metric (failed, never ran, or not
-- reported) has NULL, not 0: an aggregate over nodes must not count a buggy
-- node as a measurement.
ALTER TABLE nodes MODIFY COLUMN metric_value Nullable(Float64);
