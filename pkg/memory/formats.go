package memory

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/internal/textcut"
)

// Token-efficient formats of the memory (seed 004, V2). A Tree is the
// memory of a run as data: each branch's visible state. It has four
// encodings:
//
//   - verbose: indented JSON with every field named and each fact's hash,
//     as a dump of the stores reads (the baseline);
//   - compact (0c): one line per item, a one-letter op code, fields
//     separated by spaces, hashes left out (they are recomputed from the
//     text): lossless;
//   - delta: the root's state, then each branch as the difference from its
//     parent's state (keep the first k events and facts of the parent,
//     then what is new; core keys set or deleted): lossless;
//   - levels L0 (short hash and title), L1 (plus the key predicates: kind,
//     key, tags, repeats, and the first words), L2 (everything): for
//     reading, not for decoding. Rendering uses L1 and L0 for archival hits
//     when the section's budget is tight.

// Tree is the state of every branch of a run; a parent comes before its
// children.
type Tree struct {
	Branches []BranchState `json:"branches"`
}

// BranchState is one branch's visible memory.
type BranchState struct {
	ID     string `json:"id"`
	Parent string `json:"parent,omitempty"`
	State  State  `json:"state"`
}

// State is what a branch sees: core keys (sorted), recall events and
// archival facts (in write order).
type State struct {
	Core     []StateCore  `json:"core,omitempty"`
	Recall   []StateEvent `json:"recall,omitempty"`
	Archival []StateFact  `json:"archival,omitempty"`
}

// StateCore is a core key's value.
type StateCore struct {
	Key        string `json:"key"`
	Value      string `json:"value"`
	Importance int    `json:"importance"`
}

// StateEvent is a recall event.
type StateEvent struct {
	Kind    string `json:"kind"`
	Phase   string `json:"phase,omitempty"`
	Node    string `json:"node,omitempty"`
	Payload string `json:"payload"`
}

// StateFact is an archival fact and how many times it was written.
type StateFact struct {
	Text  string   `json:"text"`
	Tags  []string `json:"tags,omitempty"`
	Count int      `json:"count"`
}

// ErrFormat: a serialized memory that cannot be read; the message says
// where and why.
var ErrFormat = errors.New("memory: bad serialized memory")

// verbose forms carry the fields a store dump has: each fact's hash.
type verboseFact struct {
	Kind     string   `json:"kind"`
	FactHash string   `json:"fact_hash"`
	Text     string   `json:"text"`
	Tags     []string `json:"tags"`
	Count    int      `json:"count"`
}

type verboseEvent struct {
	Kind      string `json:"kind"`
	EventKind string `json:"event_kind"`
	Phase     string `json:"phase"`
	NodeID    string `json:"node_id"`
	Payload   string `json:"payload"`
}

type verboseCore struct {
	Kind       string `json:"kind"`
	Key        string `json:"key"`
	Value      string `json:"value"`
	Importance int    `json:"importance"`
}

type verboseBranch struct {
	Branch   string         `json:"branch"`
	Parent   string         `json:"parent"`
	Core     []verboseCore  `json:"core"`
	Recall   []verboseEvent `json:"recall"`
	Archival []verboseFact  `json:"archival"`
}

// EncodeVerbose is the baseline: indented JSON, every field named.
func EncodeVerbose(t Tree) ([]byte, error) {
	out := make([]verboseBranch, 0, len(t.Branches))
	for _, b := range t.Branches {
		v := verboseBranch{Branch: b.ID, Parent: b.Parent, Core: []verboseCore{}, Recall: []verboseEvent{}, Archival: []verboseFact{}}
		for _, c := range b.State.Core {
			v.Core = append(v.Core, verboseCore{"core", c.Key, c.Value, c.Importance})
		}
		for _, e := range b.State.Recall {
			v.Recall = append(v.Recall, verboseEvent{"recall", e.Kind, e.Phase, e.Node, e.Payload})
		}
		for _, f := range b.State.Archival {
			v.Archival = append(v.Archival, verboseFact{"archival", FactHash(f.Text), f.Text, orEmpty(f.Tags), f.Count})
		}
		out = append(out, v)
	}
	return json.MarshalIndent(out, "", "  ")
}

// DecodeVerbose reads EncodeVerbose's output; a fact whose hash is not
// its text's is refused.
func DecodeVerbose(data []byte) (Tree, error) {
	var in []verboseBranch
	if err := json.Unmarshal(data, &in); err != nil {
		return Tree{}, fmt.Errorf("%w: verbose: %v", ErrFormat, err)
	}
	var t Tree
	for _, v := range in {
		b := BranchState{ID: v.Branch, Parent: v.Parent}
		for _, c := range v.Core {
			b.State.Core = append(b.State.Core, StateCore{c.Key, c.Value, c.Importance})
		}
		for _, e := range v.Recall {
			b.State.Recall = append(b.State.Recall, StateEvent{e.EventKind, e.Phase, e.NodeID, e.Payload})
		}
		for _, f := range v.Archival {
			if FactHash(f.Text) != f.FactHash {
				return Tree{}, fmt.Errorf("%w: verbose: branch %s: fact_hash %.12s... is not its text's", ErrFormat, v.Branch, f.FactHash)
			}
			b.State.Archival = append(b.State.Archival, StateFact{f.Text, nilIfEmpty(f.Tags), f.Count})
		}
		t.Branches = append(t.Branches, b)
	}
	return t.tidy(), nil
}

// CompactHeader starts every compact or delta serialization.
const (
	CompactHeader = "0c1"
	DeltaHeader   = "0d1"
)

// EncodeCompact writes the tree in the compact format:
//
//	0c1
//	b <branch> <parent or ->
//	c <key> <importance> <value>
//	r <kind> <phase or -> <node or -> <payload>
//	a <tags, comma-separated, or -> <count> <text>
//
// Fields are percent-escaped (space, comma, %, newline); the last field of
// a line takes the rest of it, with \, newline and CR escaped.
func EncodeCompact(t Tree) string {
	var b strings.Builder
	b.WriteString(CompactHeader + "\n")
	for _, br := range t.Branches {
		writeBranchLine(&b, br)
		writeState(&b, br.State)
	}
	return b.String()
}

func writeBranchLine(b *strings.Builder, br BranchState) {
	fmt.Fprintf(b, "b %s %s\n", field(br.ID), field(br.Parent))
}

func writeState(b *strings.Builder, s State) {
	for _, c := range s.Core {
		writeCore(b, c)
	}
	for _, e := range s.Recall {
		writeEvent(b, e)
	}
	for _, f := range s.Archival {
		writeFact(b, "a", f)
	}
}

func writeCore(b *strings.Builder, c StateCore) {
	fmt.Fprintf(b, "c %s %d %s\n", field(c.Key), c.Importance, rest(c.Value))
}

func writeEvent(b *strings.Builder, e StateEvent) {
	fmt.Fprintf(b, "r %s %s %s %s\n", field(e.Kind), field(e.Phase), field(e.Node), rest(e.Payload))
}

func writeFact(b *strings.Builder, op string, f StateFact) {
	tags := make([]string, len(f.Tags))
	for i, t := range f.Tags {
		tags[i] = field(t)
	}
	ts := strings.Join(tags, ",")
	if ts == "" {
		ts = "-"
	}
	fmt.Fprintf(b, "%s %s %d %s\n", op, ts, f.Count, rest(f.Text))
}

// DecodeCompact reads EncodeCompact's output.
func DecodeCompact(text string) (Tree, error) {
	var t Tree
	err := readLines(text, CompactHeader, func(n int, op string, f []string) error {
		if op == "b" {
			t.Branches = append(t.Branches, BranchState{ID: f[0], Parent: f[1]})
			return nil
		}
		if len(t.Branches) == 0 {
			return fmt.Errorf("line %d: %q before any branch", n, op)
		}
		s := &t.Branches[len(t.Branches)-1].State
		return s.add(op, f)
	})
	return t.tidy(), err
}

// tidy makes empty lists nil, as the encoders never tell them apart.
func (t Tree) tidy() Tree {
	for i := range t.Branches {
		s := &t.Branches[i].State
		if len(s.Core) == 0 {
			s.Core = nil
		}
		if len(s.Recall) == 0 {
			s.Recall = nil
		}
		if len(s.Archival) == 0 {
			s.Archival = nil
		}
	}
	return t
}

// fieldsOf is how many fields each op has (the last one the rest of the line).
var fieldsOf = map[string]int{"b": 2, "c": 3, "r": 4, "a": 3, "k": 2, "d": 1, "n": 3}

func readLines(text, header string, line func(n int, op string, f []string) error) error {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 64<<20)
	n := 0
	for sc.Scan() {
		n++
		l := sc.Text()
		if n == 1 {
			if l != header {
				return fmt.Errorf("%w: line 1: %q, want %q", ErrFormat, textcut.OneLine(l, 40), header)
			}
			continue
		}
		op, after, _ := strings.Cut(l, " ")
		want, ok := fieldsOf[op]
		if !ok {
			return fmt.Errorf("%w: line %d: unknown op %q", ErrFormat, n, textcut.OneLine(op, 20))
		}
		f := strings.SplitN(after, " ", want)
		if len(f) != want {
			return fmt.Errorf("%w: line %d: op %q has %d fields, want %d", ErrFormat, n, op, len(f), want)
		}
		for i := range f {
			var err error
			switch {
			case i == want-1 && op != "b" && op != "k" && op != "d":
				f[i], err = unrest(f[i])
			case i == 0 && (op == "a" || op == "n"):
				// tags: each escaped on its own, split by add
			default:
				f[i], err = unfield(f[i])
			}
			if err != nil {
				return fmt.Errorf("%w: line %d: %v", ErrFormat, n, err)
			}
		}
		if err := line(n, op, f); err != nil {
			if errors.Is(err, ErrFormat) {
				return err
			}
			return fmt.Errorf("%w: line %d: %v", ErrFormat, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: empty", ErrFormat)
	}
	return nil
}

// add applies one item line to s.
func (s *State) add(op string, f []string) error {
	switch op {
	case "c":
		imp, err := strconv.Atoi(f[1])
		if err != nil || imp < 0 {
			return fmt.Errorf("core %q: importance %q", f[0], f[1])
		}
		s.Core = append(s.Core, StateCore{Key: f[0], Importance: imp, Value: f[2]})
	case "r":
		s.Recall = append(s.Recall, StateEvent{Kind: f[0], Phase: f[1], Node: f[2], Payload: f[3]})
	case "a", "n":
		count, err := strconv.Atoi(f[1])
		if err != nil || count < 1 {
			return fmt.Errorf("fact count %q", f[1])
		}
		var tags []string
		if f[0] != "-" {
			for _, t := range strings.Split(f[0], ",") {
				u, err := unfield(t)
				if err != nil {
					return err
				}
				tags = append(tags, u)
			}
		}
		s.Archival = append(s.Archival, StateFact{Text: f[2], Tags: tags, Count: count})
	default:
		return fmt.Errorf("op %q is not an item", op)
	}
	return nil
}

// field escapes a space-separated field ("" is "-").
func field(s string) string {
	if s == "" {
		return "-"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', ',', '%', '\n', '\r':
			fmt.Fprintf(&b, "%%%02X", c)
		case '-':
			if len(s) == 1 {
				b.WriteString("%2D")
			} else {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unfield(s string) (string, error) {
	if s == "-" {
		return "", nil
	}
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("field %q: a cut %% escape", textcut.OneLine(s, 40))
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("field %q: bad %% escape", textcut.OneLine(s, 40))
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// rest escapes the last field of a line.
func rest(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`).Replace(s)
}

func unrest(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("a cut \\ escape at the end of a line")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		default:
			return "", fmt.Errorf("unknown escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

// EncodeDelta writes the root states in full and every other branch as
// its difference from its parent's state:
//
//	0d1
//	b <branch> <parent or ->
//	k <events kept> <facts kept>       the first of the parent's
//	c <key> <importance> <value>       a core key set (or changed)
//	d <key>                            a parent's core key the branch has not
//	r ...                              an event after those kept
//	n <tags> <count> <text>            a kept fact's new count
//	a <tags> <count> <text>            a fact after those kept
//
// A parent must come before its children.
func EncodeDelta(t Tree) (string, error) {
	var b strings.Builder
	b.WriteString(DeltaHeader + "\n")
	states := map[string]State{}
	for _, br := range t.Branches {
		writeBranchLine(&b, br)
		states[br.ID] = br.State
		if br.Parent == "" {
			writeState(&b, br.State)
			continue
		}
		parent, ok := states[br.Parent]
		if !ok {
			return "", fmt.Errorf("delta: branch %s comes before its parent %s", br.ID, br.Parent)
		}
		writeDiff(&b, parent, br.State)
	}
	return b.String(), nil
}

func writeDiff(b *strings.Builder, parent, child State) {
	events := 0
	for events < len(parent.Recall) && events < len(child.Recall) && parent.Recall[events] == child.Recall[events] {
		events++
	}
	facts := 0
	for facts < len(parent.Archival) && facts < len(child.Archival) && sameFact(parent.Archival[facts], child.Archival[facts]) {
		facts++
	}
	fmt.Fprintf(b, "k %d %d\n", events, facts)
	pc := map[string]StateCore{}
	for _, c := range parent.Core {
		pc[c.Key] = c
	}
	cc := map[string]bool{}
	for _, c := range child.Core {
		cc[c.Key] = true
		if p, ok := pc[c.Key]; !ok || p != c {
			writeCore(b, c)
		}
	}
	for _, c := range parent.Core {
		if !cc[c.Key] {
			fmt.Fprintf(b, "d %s\n", field(c.Key))
		}
	}
	for _, e := range child.Recall[events:] {
		writeEvent(b, e)
	}
	for i, f := range child.Archival[:facts] {
		if f.Count != parent.Archival[i].Count {
			writeFact(b, "n", f)
		}
	}
	for _, f := range child.Archival[facts:] {
		writeFact(b, "a", f)
	}
}

func sameFact(a, b StateFact) bool { return a.Text == b.Text && slices.Equal(a.Tags, b.Tags) }

// DecodeDelta reads EncodeDelta's output back into the states.
//
// Long: one case per field of EncodeDelta's format, in its order.
func DecodeDelta(text string) (Tree, error) {
	var t Tree
	states := map[string]int{} // branch -> index in t.Branches
	var cur *State
	var parent State
	err := readLines(text, DeltaHeader, func(n int, op string, f []string) error {
		switch op {
		case "b":
			br := BranchState{ID: f[0], Parent: f[1]}
			if _, dup := states[br.ID]; dup {
				return fmt.Errorf("branch %s twice", br.ID)
			}
			parent = State{}
			if br.Parent != "" {
				i, ok := states[br.Parent]
				if !ok {
					return fmt.Errorf("branch %s before its parent %s", br.ID, br.Parent)
				}
				parent = t.Branches[i].State
			}
			states[br.ID] = len(t.Branches)
			t.Branches = append(t.Branches, br)
			cur = &t.Branches[len(t.Branches)-1].State
			if br.Parent != "" {
				// Until its k line, a child has the parent's core.
				cur.Core = slices.Clone(parent.Core)
			}
			return nil
		case "k":
			if cur == nil {
				return errors.New("k before any branch")
			}
			ev, err1 := strconv.Atoi(f[0])
			fa, err2 := strconv.Atoi(f[1])
			if err1 != nil || err2 != nil || ev < 0 || fa < 0 || ev > len(parent.Recall) || fa > len(parent.Archival) {
				return fmt.Errorf("k %s %s: the parent has %d events and %d facts", f[0], f[1], len(parent.Recall), len(parent.Archival))
			}
			cur.Recall = slices.Clone(parent.Recall[:ev])
			cur.Archival = slices.Clone(parent.Archival[:fa])
			return nil
		}
		if cur == nil {
			return fmt.Errorf("%q before any branch", op)
		}
		switch op {
		case "c":
			var tmp State
			if err := tmp.add(op, f); err != nil {
				return err
			}
			c := tmp.Core[0]
			i := slices.IndexFunc(cur.Core, func(x StateCore) bool { return x.Key == c.Key })
			if i >= 0 {
				cur.Core[i] = c
			} else {
				cur.Core = append(cur.Core, c)
				slices.SortFunc(cur.Core, func(a, b StateCore) int { return strings.Compare(a.Key, b.Key) })
			}
		case "d":
			i := slices.IndexFunc(cur.Core, func(x StateCore) bool { return x.Key == f[0] })
			if i < 0 {
				return fmt.Errorf("d %s: no such core key", f[0])
			}
			cur.Core = slices.Delete(cur.Core, i, i+1)
		case "n":
			var tmp State
			if err := tmp.add(op, f); err != nil {
				return err
			}
			nf := tmp.Archival[0]
			i := slices.IndexFunc(cur.Archival, func(x StateFact) bool { return sameFact(x, nf) })
			if i < 0 {
				return errors.New("n: no such kept fact")
			}
			cur.Archival[i].Count = nf.Count
		default:
			return cur.add(op, f)
		}
		return nil
	})
	return t.tidy(), err
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
