-- The nodes a phase run spanned and the MPI ranks hpcq launched across them
-- (limits.nodes, ranks_per_node): a multi-node task's run phase; 1 and 0 for
-- everything else. One column a statement (see 0005).
ALTER TABLE phase_runs ADD COLUMN nodes UInt32 DEFAULT 1;
ALTER TABLE phase_runs ADD COLUMN ranks UInt32 DEFAULT 0;
