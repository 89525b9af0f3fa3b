// Command tokens is the token benchmark behind `make bench-tokens` (seed
// 004's harness): it builds the memory that a trace
// (../shared/bench/memory-trace-base.jsonl.gz) leaves in every branch, the
// state each branch sees, and serializes all of them in each format,
// counting cl100k_base tokens (tiktoken's BPE, embedded: nothing is
// downloaded). It prints, exactly, one line per format:
//
//	bench-tokens trace=<t> format=<verbose|compact|L0|L1|L2|delta> tokens=<int> tokens_per_fact=<f> serialize_us=<f> deserialize_us=<f> round_trip=<ok|failed|n/a>
//
// for the trace as recorded (trace=base: every fork comes before any write,
// so a branch sees only its own writes) and for the same writes in tree
// order (trace=base-tree: each branch's writes right after its fork, so a
// child sees what its ancestors wrote before it forked, as in a tree
// search). Times are the median of -runs encodings (and decodings) of the
// whole tree; the levels are for reading, so they have no decoding
// (deserialize_us=0, round_trip=n/a). tokens_per_fact divides by the
// items (core keys, events, facts) of all branches' states.
package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	benchtrace "github.com/hpcq/hpcq/bench/trace"
	"github.com/hpcq/hpcq/pkg/memory"
)

func main() {
	dir := flag.String("dir", "../shared/bench", "directory of the traces")
	trace := flag.String("trace", "base", "trace: base or 10x")
	runs := flag.Int("runs", 5, "encodings (and decodings) timed per format; the median is printed")
	flag.Parse()
	if err := run(*dir, *trace, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench-tokens:", err)
		os.Exit(1)
	}
}

func run(dir, trace string, runs int) error {
	ops, err := benchtrace.Read(dir, trace)
	if err != nil {
		return err
	}
	enc, err := encoding()
	if err != nil {
		return err
	}
	count := func(s string) int { return len(enc.Encode(s, nil, nil)) }
	for _, v := range []struct {
		name string
		ops  []op
	}{{trace, ops}, {trace + "-tree", treeOrder(ops)}} {
		tree, err := build(v.ops)
		if err != nil {
			return fmt.Errorf("trace %s: %w", v.name, err)
		}
		facts := 0
		for _, b := range tree.Branches {
			facts += len(b.State.Core) + len(b.State.Recall) + len(b.State.Archival)
		}
		fmt.Fprintf(os.Stderr, "trace=%s branches=%d facts=%d tokenizer=cl100k_base (tiktoken-go, embedded BPE)\n", v.name, len(tree.Branches), facts)
		for _, f := range formats(tree) {
			var text string
			ser := median(runs, func() {
				text, err = f.encode()
			})
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			de, rt := 0.0, "n/a"
			if f.decode != nil {
				var back memory.Tree
				var derr error
				de = median(runs, func() { back, derr = f.decode(text) })
				rt = "ok"
				if derr != nil || !reflect.DeepEqual(back, tree) {
					rt = "failed"
					fmt.Fprintf(os.Stderr, "%s: round trip: %v\n", f.name, derr)
				}
			}
			tokens := count(text)
			fmt.Printf("bench-tokens trace=%s format=%s tokens=%d tokens_per_fact=%.2f serialize_us=%.1f deserialize_us=%.1f round_trip=%s\n",
				v.name, f.name, tokens, float64(tokens)/float64(max(facts, 1)), ser, de, rt)
			fmt.Fprintf(os.Stderr, "  %s: %d bytes\n", f.name, len(text))
		}
	}
	return nil
}

// encoding is cl100k_base, read from the BPE file embedded in the loader.
func encoding() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding("cl100k_base")
	if err != nil {
		return nil, fmt.Errorf("cl100k_base: %w", err)
	}
	return enc, nil
}

type format struct {
	name   string
	encode func() (string, error)
	decode func(string) (memory.Tree, error)
}

func formats(t memory.Tree) []format {
	return []format{
		{"verbose", func() (string, error) {
			b, err := memory.EncodeVerbose(t)
			return string(b), err
		}, func(s string) (memory.Tree, error) { return memory.DecodeVerbose([]byte(s)) }},
		{"compact", func() (string, error) { return memory.EncodeCompact(t), nil }, memory.DecodeCompact},
		{"L0", func() (string, error) { return memory.RenderLevel(t, memory.L0), nil }, nil},
		{"L1", func() (string, error) { return memory.RenderLevel(t, memory.L1), nil }, nil},
		{"L2", func() (string, error) { return memory.RenderLevel(t, memory.L2), nil }, nil},
		{"delta", func() (string, error) { return memory.EncodeDelta(t) }, memory.DecodeDelta},
	}
}

// median runs f n times and returns the median time in microseconds.
func median(n int, f func()) float64 {
	ts := make([]float64, 0, n)
	for range max(n, 1) {
		start := time.Now()
		f()
		ts = append(ts, float64(time.Since(start).Nanoseconds())/1e3)
	}
	sort.Float64s(ts)
	return ts[len(ts)/2]
}

type op = benchtrace.Op

// treeOrder moves each branch's writes right after its fork.
func treeOrder(ops []op) []op {
	writes := map[string][]op{}
	var out []op
	for _, o := range ops {
		if o.Op != "fork" && o.Op != "render" && o.Op != "archival_search" && o.Op != "export" {
			writes[o.Branch] = append(writes[o.Branch], o)
		}
	}
	for _, o := range ops {
		if o.Op == "fork" {
			out = append(out, o)
			out = append(out, writes[o.Branch]...)
		}
	}
	return out
}

// write is one write of a branch, with the run-wide seq it took.
type write struct {
	seq  int64
	kind string // core, recall, archival, repeat
	core memory.StateCore
	ev   memory.StateEvent
	fact memory.StateFact
}

type branch struct {
	id, parent string
	forkSeq    int64
	writes     []write
}

// build replays the writes with the stores' visibility (a branch sees its
// own writes and each ancestor's before the path forked from it) and
// returns every branch's visible state.
func build(ops []op) (memory.Tree, error) {
	var seq int64
	branches := map[string]*branch{}
	var order []string
	for _, o := range ops {
		b := branches[o.Branch]
		if o.Op != "fork" && b == nil && (o.Op == "core_set" || o.Op == "recall_append" || o.Op == "archival_write") {
			return memory.Tree{}, fmt.Errorf("%s on unknown branch %s", o.Op, o.Branch)
		}
		switch o.Op {
		case "fork":
			p := ""
			if o.Parent != nil {
				p = *o.Parent
				if branches[p] == nil {
					return memory.Tree{}, fmt.Errorf("fork of %s from unknown %s", o.Branch, p)
				}
			}
			branches[o.Branch] = &branch{id: o.Branch, parent: p, forkSeq: seq}
			order = append(order, o.Branch)
		case "core_set":
			seq++
			b.writes = append(b.writes, write{seq: seq, kind: "core", core: memory.StateCore{Key: o.Key, Value: o.Value, Importance: 3}})
		case "recall_append":
			seq++
			b.writes = append(b.writes, write{seq: seq, kind: "recall", ev: memory.StateEvent{Kind: o.Kind, Node: o.Branch, Payload: o.Text}})
		case "archival_write":
			seq++
			w := write{seq: seq, kind: "archival", fact: memory.StateFact{Text: o.Text, Tags: o.Tags, Count: 1}}
			if visibleFact(branches, b, o.Text) {
				w.kind = "repeat"
			}
			b.writes = append(b.writes, w)
		}
	}
	var t memory.Tree
	for _, id := range order {
		b := branches[id]
		t.Branches = append(t.Branches, memory.BranchState{ID: id, Parent: b.parent, State: visible(branches, b)})
	}
	return t, nil
}

// scope is b's visible writes, oldest first.
func scope(branches map[string]*branch, b *branch) []write {
	var chain [][]write
	limit := int64(1<<62 - 1)
	for cur := b; cur != nil; cur = branches[cur.parent] {
		n := sort.Search(len(cur.writes), func(i int) bool { return cur.writes[i].seq > limit })
		chain = append(chain, cur.writes[:n])
		limit = min(limit, cur.forkSeq)
		if cur.parent == "" {
			break
		}
	}
	var out []write
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i]...)
	}
	return out
}

func visibleFact(branches map[string]*branch, b *branch, text string) bool {
	h := memory.FactHash(text)
	for _, w := range scope(branches, b) {
		if w.kind == "archival" && memory.FactHash(w.fact.Text) == h {
			return true
		}
	}
	return false
}

func visible(branches map[string]*branch, b *branch) memory.State {
	var s memory.State
	core := map[string]memory.StateCore{}
	facts := map[string]int{}
	for _, w := range scope(branches, b) {
		switch w.kind {
		case "core":
			core[w.core.Key] = w.core
		case "recall":
			s.Recall = append(s.Recall, w.ev)
		case "archival":
			facts[memory.FactHash(w.fact.Text)] = len(s.Archival)
			s.Archival = append(s.Archival, w.fact)
		case "repeat":
			if i, ok := facts[memory.FactHash(w.fact.Text)]; ok {
				s.Archival[i].Count++
			}
		}
	}
	keys := make([]string, 0, len(core))
	for k := range core {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s.Core = append(s.Core, core[k])
	}
	return s
}
