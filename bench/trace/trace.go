// Package trace reads the memory workload traces of ../shared/bench
// (memory-trace-<name>.jsonl.gz): one JSON op per line.
package trace

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Op is one line of a trace.
type Op struct {
	Op     string   `json:"op"`
	Branch string   `json:"branch"`
	Parent *string  `json:"parent"`
	Key    string   `json:"key"`
	Value  string   `json:"value"`
	Kind   string   `json:"kind"`
	Text   string   `json:"text"`
	Tags   []string `json:"tags"`
	Dup    bool     `json:"dup"`
	Budget int      `json:"budget_chars"`
	Hint   string   `json:"task_hint"`
	K      int      `json:"k"`
	Query  string   `json:"query"`
}

// SHA256 are the uncompressed traces' sums (../shared/bench/README.md).
var SHA256 = map[string]string{
	"base": "01eb0a42a556d5479daaa190bd7fdf558c72cbbeae32caeb1deb0856daf8187a",
	"10x":  "15cf22f69e1ff2e1c879fdad3bd1817436d2242c3bc51b8ddbd25e5095e56309",
}

// Read reads trace name from dir; a trace whose sum is known and differs
// is refused (a different workload would not compare).
func Read(dir, name string) ([]Op, error) {
	path := filepath.Join(dir, "memory-trace-"+name+".jsonl.gz")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h := sha256.New()
	sc := bufio.NewScanner(io.TeeReader(zr, h))
	sc.Buffer(nil, 16<<20)
	var ops []Op
	for sc.Scan() {
		o, err := Parse(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, len(ops)+1, err)
		}
		ops = append(ops, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if want, got := SHA256[name], hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
		return nil, fmt.Errorf("%s: sha256 %s, want %s (a different trace)", path, got, want)
	}
	return ops, nil
}

// Parse reads one line.
func Parse(line []byte) (Op, error) {
	var o Op
	err := json.Unmarshal(line, &o)
	return o, err
}
