package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/hpcq/hpcq/internal/jsonw"
	"github.com/hpcq/hpcq/pkg/memory"
)

// Import writes rows, a run's whole memory with its seqs (another store's,
// memory.Rows), into a new store file at path, in one transaction: a
// store opened on it then reads what the rows' store read. The file must
// not exist yet.
func Import(path string, o Options, rows memory.Rows) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			err = fs.ErrExist
		}
		return fmt.Errorf("memory/sqlite: import into %s: %w", path, err)
	}
	s, err := Open(path, o)
	if err != nil {
		return err
	}
	var b batch
	add := func(stmt string, args ...any) { b.rows = append(b.rows, row{stmt: stmt, args: args}) }
	for _, br := range rows.Branches {
		add("branch", br.ID, br.Parent, br.ForkSeq, br.Depth, msOrZero(br.Created))
	}
	for _, v := range rows.Core {
		deleted := 0
		if v.Deleted {
			deleted = 1
		}
		add("core", v.Seq, v.Branch, v.Key, v.Value, v.Importance, msOrZero(v.Expires), deleted, msOrZero(v.Updated))
	}
	for _, e := range rows.Recall {
		add("recall", e.Seq, e.Branch, msOrZero(e.TS), e.Kind, e.NodeID, e.Phase, e.Payload)
	}
	for _, v := range rows.Summaries {
		// ts_ms 0: a summary's time is not kept (Redis has none); no read uses it.
		add("summary", v.Seq, v.Branch, v.Summary.Text, v.Summary.FoldedSeq, int64(0))
	}
	for _, it := range rows.Archival {
		tags := it.Tags
		if tags == nil {
			tags = []string{}
		}
		add("archival", it.Seq, it.Branch, it.Text, string(jsonw.AppendStrings(nil, tags)), it.Context, it.FactHash, it.EpisodeHash,
			memory.CountTerms(it.Text), msOrZero(it.FirstSeen))
	}
	for _, h := range rows.Hits {
		add("hit", h.Seq, h.Branch, h.Target, msOrZero(h.TS))
	}
	// The committer is idle (nothing was written): the rows go in through
	// the writer connection as one commit.
	err = s.commitBatches([]batch{b})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = Remove(path)
		return fmt.Errorf("memory/sqlite: import into %s: %w", path, err)
	}
	return nil
}

// msOrZero is t in Unix milliseconds, 0 for the zero time (as fromMS reads it).
func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return ms(t)
}

// Remove removes the store file at path and the files beside it (its WAL,
// journal and lock); files already gone are no error.
func Remove(path string) error {
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm", ".journal", ".lock"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
