package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
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
	p, err := b.encode(nil)
	require.NoError(t, err)
	got, err := decodeBatch(p)
	require.NoError(t, err)
	require.Equal(t, b.seq, got.seq)
	require.Len(t, got.rows, 2)
	require.Equal(t, []any{int64(1<<60 - 1), "b", "k", "välue \x00 \"quoted\"", int64(3), int64(0), int64(0), int64(1_700_000_000_123)}, got.rows[0].args)
	require.Equal(t, "hit", got.rows[1].stmt)
}

// TestEncodeRejects: a row argument other than a string or an integer
// is refused when the call journals it, not found at a replay.
func TestEncodeRejects(t *testing.T) {
	for _, a := range []any{1.5, true, nil, []byte("x"), int32(1)} {
		_, err := batch{seq: 1, rows: []row{{stmt: "hit", args: []any{int64(1), a}}}}.encode(nil)
		require.ErrorContains(t, err, "hit: argument 2 has type", "%T", a)
	}
}

// FuzzEncodeBatch: a record is the bytes json.Marshal writes for it
// (journals written before the encoder was written by hand read the same),
// whatever the bytes of the strings, and reads back as it.
func FuzzEncodeBatch(f *testing.F) {
	f.Add("plain", "välue \x00 \"quoted\" \\ <script>&\u2028\n\t\r\x1f", int64(-1), 7)
	f.Add("\xff\xfe invalid", "\xed\xa0\x80 surrogate", int64(1<<62), -3)
	f.Fuzz(func(t *testing.T, s1, s2 string, n1 int64, n2 int) {
		b := batch{seq: n1, rows: []row{
			{stmt: "core", args: []any{n1, s1, s2, n2}},
			{stmt: "recall", args: []any{s2}},
		}}
		p, err := b.encode(nil)
		require.NoError(t, err)
		require.True(t, json.Valid(p), "%q", p)
		r := record{S: b.seq}
		for _, rw := range b.rows {
			r.R = append(r.R, append([]any{rw.stmt}, rw.args...))
		}
		ref, err := json.Marshal(r)
		require.NoError(t, err)
		require.Equal(t, string(ref), string(p), "json.Marshal's bytes")
		want, err := decodeBatch(ref)
		require.NoError(t, err)
		got, err := decodeBatch(p)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
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

// BenchmarkEncodeBatch: a node's recall event (a 1.5 KB payload, as a
// phase's log tail) journaled by the encoder and, as the baseline, by
// json.Marshal of a record.
func BenchmarkEncodeBatch(b *testing.B) {
	payload := strings.Repeat("exit 0 in 12 ms; \"quoted\"\tcolumns\n", 1500/36)
	bt := batch{seq: 123456, rows: []row{{stmt: "recall", args: []any{int64(123456), "n0042", int64(1_700_000_000_123), "execution_result", "n0042", "run", payload}}}}
	b.Run("encode", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = bt.encode(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			r := record{S: bt.seq, R: make([][]any, len(bt.rows))}
			for i, rw := range bt.rows {
				r.R[i] = append([]any{rw.stmt}, rw.args...)
			}
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
