package queue

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/hpcq/hpcq/pkg/schema"
)

func TestBatchMsgID(t *testing.T) {
	a := batchMsgID([]string{"r/a/1", "r/b/1"})
	if a != batchMsgID([]string{"r/a/1", "r/b/1"}) {
		t.Fatal("the same batch asked twice must have the same id")
	}
	for _, other := range [][]string{{"r/b/1", "r/a/1"}, {"r/a/1", "r/c/1"}, {"r/a/1"}, {"r/a/1r/b/1"}, {"r/a/1\nr/b/1"}} {
		if batchMsgID(other) == a {
			t.Errorf("batch %q has the id of another", other)
		}
	}
	if strings.Contains(a, "/") {
		t.Errorf("a batch's id %q could be a single result's", a)
	}
}

func encodedResult(t testing.TB, node string) []byte {
	data, err := json.Marshal(&schema.NodeResult{V: 1, RunID: "r", NodeID: node, Attempt: 1, Worker: "w"})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzDecodeResults: whatever a results message holds, decoding it never
// panics, returns only valid results, and a message without errors is
// exactly what it says.
func FuzzDecodeResults(f *testing.F) {
	a, b := encodedResult(f, "a"), encodedResult(f, "b")
	f.Add("", a)
	f.Add("2", bytes.Join([][]byte{a, b}, []byte{'\n'}))
	f.Add("3", bytes.Join([][]byte{a, []byte(`{"v":2}`), b}, []byte{'\n'}))
	f.Add("1", append(append([]byte{}, a...), '\n'))
	f.Add("-1", a)
	f.Add("x", []byte("\n\n"))
	f.Fuzz(func(t *testing.T, hdr string, data []byte) {
		rs, errs := decodeResults(hdr, data)
		for _, r := range rs {
			if err := r.Validate(); err != nil {
				t.Fatalf("invalid result returned: %v", err)
			}
		}
		if hdr == "" && len(rs) > 1 {
			t.Fatalf("a single-result message gave %d results", len(rs))
		}
		if hdr != "" && len(errs) == 0 {
			if n, err := strconv.Atoi(hdr); err != nil || n != len(rs) || n != bytes.Count(data, []byte{'\n'})+1 {
				t.Fatalf("no error, but header %q, %d results", hdr, len(rs))
			}
		}
		if len(rs) == 0 && len(errs) == 0 {
			t.Fatal("nothing decoded and no error")
		}
	})
}
