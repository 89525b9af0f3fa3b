package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

func TestBatchRoundTrip(t *testing.T) {
	b := batch{seq: 1 << 60, rows: []row{
		{stmt: "core", args: []any{int64(1<<60 - 1), "b", "k", "välue \x00 \"quoted\"", 3, int64(0), 0, int64(1_700_000_000_123)}},
		{stmt: "hit", args: []any{int64(1 << 60), "b", int64(7), int64(1)}},
	}}
	p, err := b.encode()
	require.NoError(t, err)
	got, err := decodeBatch(p)
	require.NoError(t, err)
	require.Equal(t, b.seq, got.seq)
	require.Len(t, got.rows, 2)
	require.Equal(t, []any{int64(1<<60 - 1), "b", "k", "välue \x00 \"quoted\"", int64(3), int64(0), int64(0), int64(1_700_000_000_123)}, got.rows[0].args)
	require.Equal(t, "hit", got.rows[1].stmt)
}

func TestDecodeBatchRejects(t *testing.T) {
	for _, bad := range []string{
		``, `{`, `{"s":1,"r":[[]]}`, `{"s":1,"r":[["drop table"]]}`, `{"s":1,"r":[[1]]}`,
		`{"s":1,"r":[["core",1.5]]}`, `{"s":1,"r":[["core",true]]}`, `{"s":1,"r":[["core",null]]}`, `{"s":1,"r":[["core",[1]]]}`,
	} {
		_, err := decodeBatch([]byte(bad))
		require.Error(t, err, bad)
	}
}

// FuzzDecodeBatch: journal content never panics the decoder, and what it
// accepts names a known statement with string and integer arguments only.
func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"s":3,"r":[["recall",3,"b",1,"kind","n","p","payload"]]}`))
	f.Add([]byte(`{"s":1,"r":[["branch","root","",1,0,5]]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		b, err := decodeBatch(p)
		if err != nil {
			return
		}
		for _, r := range b.rows {
			_, ok := statements[r.stmt]
			require.True(t, ok)
			for _, a := range r.args {
				switch a.(type) {
				case string, int64:
				default:
					t.Fatalf("argument of type %T", a)
				}
			}
		}
	})
}

// TestCommitGathers: the committer gathers the journaled batches into one
// transaction until Flush asks (the delay here is an hour, so nothing else
// commits them), commits at once past commitRows, and Close commits what is
// left; every write is in the file after each.
func TestCommitGathers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.sqlite")
	s, err := Open(path, Options{commitDelay: time.Hour})
	require.NoError(t, err)
	commits := func() int {
		s.pmu.Lock()
		defer s.pmu.Unlock()
		return s.commits
	}
	_, err = s.Fork(ctx, memory.ForkParams{Branch: "root"})
	require.NoError(t, err)
	for i := range 100 {
		_, err := s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "run_done", Payload: fmt.Sprint(i)}})
		require.NoError(t, err)
	}
	require.Zero(t, commits(), "committed before the delay, Flush or the row bound")
	require.NoError(t, s.Flush(ctx))
	require.Equal(t, 1, commits(), "101 writes, one transaction")
	require.Equal(t, 100, rowsIn(t, s, "mem_recall"))

	// Past commitRows the committer does not wait for the delay.
	s.pmu.Lock()
	ch := s.committed
	s.pmu.Unlock()
	for i := range commitRows {
		_, err := s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "run_done", Payload: fmt.Sprint(i)}})
		require.NoError(t, err)
	}
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%d rows pending and no commit", commitRows)
	}

	_, err = s.RecallAppend(ctx, memory.RecallAppendParams{Branch: "root", Event: memory.RecallEvent{Kind: "last"}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	r, err := Open(path, Options{ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, 101+commitRows, rowsIn(t, r, "mem_recall"), "Close commits what is pending")
}

func rowsIn(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM `+table).Scan(&n))
	return n
}
