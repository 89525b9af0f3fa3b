-- The memory tables of the cluster store (pkg/memory/cluster). Every row
-- carries its run; the sorting keys start with it. ReplacingMergeTree folds
-- the rows a retried or replayed batch inserted twice (same sorting key).
-- Written for ClickHouse 18.16 and later: no Map, DateTime64, TTL or skip
-- indexes; ts (DateTime, seconds) is for people, ts_ms for hpcq.

CREATE TABLE IF NOT EXISTS archival (
  run String, seq Int64, branch String, text String, tags Array(String), context String,
  fact_hash String, episode_hash String, doc_len UInt32, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree() ORDER BY (run, branch, seq);

-- The term index of archival for BM25 (ClickHouse 18.16 has no text index):
-- one row per (term, document), term frequency and document length.
CREATE TABLE IF NOT EXISTS archival_terms (
  run String, term String, branch String, seq Int64, tf UInt32, doc_len UInt32
) ENGINE = ReplacingMergeTree() ORDER BY (run, term, branch, seq);

-- Repeats of an archival fact: target is the seq of the stored text.
CREATE TABLE IF NOT EXISTS archival_hits (
  run String, seq Int64, branch String, target Int64, ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree() ORDER BY (run, branch, seq);

-- A mirror of the recall events kept in Redis, for analytics.
CREATE TABLE IF NOT EXISTS recall_events (
  run String, seq Int64, branch String, node_id String, phase String, kind String, payload String,
  ts_ms Int64, ts DateTime
) ENGINE = ReplacingMergeTree() ORDER BY (run, branch, seq);
