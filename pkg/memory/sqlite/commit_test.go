package sqlite

import (
	"testing"

	"github.com/stretchr/testify/require"
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
