package memory_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

// sampleTree: a root and two generations; children keep a prefix of their
// parent's events and facts, change and drop core keys, count repeats;
// texts with every character the formats escape.
func sampleTree(seed uint64) memory.Tree {
	r := rand.New(rand.NewPCG(seed, 1))
	word := func() string {
		ws := []string{"tile", "o3", "-", "a b", "50%", "x,y", "line\nbreak", `back\slash`, "cr\r", "GFLOP/s", "ü", ""}
		return ws[r.IntN(len(ws))]
	}
	text := func() string {
		var s []string
		for range 1 + r.IntN(6) {
			s = append(s, word())
		}
		return strings.Join(s, " ")
	}
	state := func(parent memory.State) memory.State {
		var s memory.State
		keep := r.IntN(len(parent.Recall) + 1)
		s.Recall = append(s.Recall, parent.Recall[:keep]...)
		for range r.IntN(4) {
			s.Recall = append(s.Recall, memory.StateEvent{Kind: "k" + word(), Phase: word(), Node: word(), Payload: text()})
		}
		keep = r.IntN(len(parent.Archival) + 1)
		s.Archival = append(s.Archival, parent.Archival[:keep]...)
		for i := range s.Archival {
			if r.IntN(3) == 0 {
				s.Archival[i].Count++
			}
		}
		for range r.IntN(4) {
			var tags []string
			for range r.IntN(3) {
				if t := word(); t != "" {
					tags = append(tags, t)
				}
			}
			s.Archival = append(s.Archival, memory.StateFact{Text: text() + fmt.Sprint(r.Int()), Tags: tags, Count: 1 + r.IntN(3)})
		}
		for _, c := range parent.Core {
			switch r.IntN(3) {
			case 0: // dropped
			case 1:
				c.Value = text()
				s.Core = append(s.Core, c)
			default:
				s.Core = append(s.Core, c)
			}
		}
		if r.IntN(2) == 0 {
			s.Core = append(s.Core, memory.StateCore{Key: fmt.Sprintf("KEY_%d", r.IntN(1000)), Value: text(), Importance: 1 + r.IntN(5)})
		}
		seen := map[string]bool{}
		var core []memory.StateCore
		for _, c := range s.Core {
			if !seen[c.Key] {
				seen[c.Key] = true
				core = append(core, c)
			}
		}
		s.Core = core
		sortCore(s.Core)
		return s
	}
	t := memory.Tree{Branches: []memory.BranchState{{ID: "root", State: state(memory.State{})}}}
	for i := 1; i < 12; i++ {
		p := t.Branches[r.IntN(len(t.Branches))]
		t.Branches = append(t.Branches, memory.BranchState{ID: fmt.Sprintf("n%04d", i), Parent: p.ID, State: state(p.State)})
	}
	return t
}

func sortCore(c []memory.StateCore) {
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j].Key < c[j-1].Key; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// TestFormatsRoundTrip: verbose, compact and delta give back the tree
// exactly; compact is smaller than verbose, delta than compact here
// (children share most of their parents' state).
func TestFormatsRoundTrip(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		tree := sampleTree(seed)
		v, err := memory.EncodeVerbose(tree)
		require.NoError(t, err)
		back, err := memory.DecodeVerbose(v)
		require.NoError(t, err)
		require.Equal(t, tree, back, "verbose, seed %d", seed)

		c := memory.EncodeCompact(tree)
		back, err = memory.DecodeCompact(c)
		require.NoError(t, err, c)
		require.Equal(t, tree, back, "compact, seed %d:\n%s", seed, c)
		require.Less(t, len(c), len(v))

		d, err := memory.EncodeDelta(tree)
		require.NoError(t, err)
		back, err = memory.DecodeDelta(d)
		require.NoError(t, err, d)
		require.Equal(t, tree, back, "delta, seed %d:\n%s", seed, d)
	}
}

// TestFormatErrors: what cannot be read is refused with where and why.
func TestFormatErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                         "empty",
		"0c2\n":                                    `line 1: "0c2", want "0c1"`,
		"0c1\nc KEY 3 v\n":                         `line 2: "c" before any branch`,
		"0c1\nb root -\nz 1\n":                     `line 3: unknown op "z"`,
		"0c1\nb root -\nc KEY\n":                   `line 3: op "c" has 1 fields, want 3`,
		"0c1\nb root -\nc K x v\n":                 `importance "x"`,
		"0c1\nb root -\na - 0 t\n":                 `fact count "0"`,
		"0c1\nb r%2 -\n":                           "a cut % escape",
		"0c1\nb root -\nc K 1 a\\":                 `a cut \ escape`,
		"0c1\nb root -\nc K 1 \\q":                 `unknown escape \q`,
		"0d1\nb n1 root\n":                         "branch n1 before its parent root",
		"0d1\nb root -\nb n1 root\nk 3 0\n":        "k 3 0: the parent has 0 events and 0 facts",
		"0d1\nb root -\nb n1 root\nk 0 0\nd KEY\n": "d KEY: no such core key",
	} {
		var err error
		if strings.HasPrefix(in, "0d1") {
			_, err = memory.DecodeDelta(in)
		} else {
			_, err = memory.DecodeCompact(in)
		}
		require.ErrorIs(t, err, memory.ErrFormat, in)
		require.ErrorContains(t, err, want, in)
	}
	tree := sampleTree(1)
	v, err := memory.EncodeVerbose(tree)
	require.NoError(t, err)
	i := strings.Index(string(v), `"fact_hash": "`) + len(`"fact_hash": "`)
	bad := string(v[:i]) + "0" + string(v[i+1:])
	if v[i] == '0' {
		bad = string(v[:i]) + "1" + string(v[i+1:])
	}
	_, err = memory.DecodeVerbose([]byte(bad))
	require.ErrorContains(t, err, "is not its text's")
}

// TestLevels: L0 is the shortest, L2 has every text whole.
func TestLevels(t *testing.T) {
	t.Parallel()
	tree := sampleTree(3)
	l0, l1, l2 := memory.RenderLevel(tree, memory.L0), memory.RenderLevel(tree, memory.L1), memory.RenderLevel(tree, memory.L2)
	require.Less(t, len(l0), len(l1))
	require.Less(t, len(l1), len(l2))
	f := tree.Branches[0].State.Archival
	if len(f) > 0 {
		require.Contains(t, l2, strings.ReplaceAll(strings.ReplaceAll(f[0].Text, "\n", " "), "\r", " ")[:1])
		require.Contains(t, l0, "#"+memory.FactHash(f[0].Text)[:6])
	}
	require.Equal(t, "#"+memory.FactHash("tile 32 with o3 beats 16 on the 4096 grid")[:6]+" tile 32 with",
		memory.FactAt("tile 32 with o3 beats 16 on the 4096 grid", []string{"idea"}, 2, memory.L0))
	require.Equal(t, "- tile 32 [idea] (seen 2 times)", memory.FactAt("tile 32", []string{"idea"}, 2, memory.L2))
}

// FuzzDecodeFormats: any input is read or refused with ErrFormat, never a
// panic; what is read encodes and reads back the same.
func FuzzDecodeFormats(f *testing.F) {
	tree := sampleTree(7)
	f.Add(memory.EncodeCompact(tree))
	d, _ := memory.EncodeDelta(tree)
	f.Add(d)
	f.Add("0c1\nb root -\nc K 1 v\\nw\nr k - - p\na x%2Cy,z 2 t\n")
	f.Add("0d1\nb root -\nr k - - p\nb n root\nk 1 0\nd K\nn - 2 t\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, delta := range []bool{false, true} {
			var tr memory.Tree
			var err error
			if delta {
				tr, err = memory.DecodeDelta(in)
			} else {
				tr, err = memory.DecodeCompact(in)
			}
			if err != nil {
				require.ErrorIs(t, err, memory.ErrFormat)
				continue
			}
			back, err := memory.DecodeCompact(memory.EncodeCompact(tr))
			require.NoError(t, err)
			require.Equal(t, normalize(tr), normalize(back))
		}
	})
}

// normalize drops what the compact form does not keep apart: empty tags.
func normalize(t memory.Tree) memory.Tree {
	for i := range t.Branches {
		s := &t.Branches[i].State
		for j := range s.Archival {
			var tags []string
			for _, x := range s.Archival[j].Tags {
				if x != "" {
					tags = append(tags, x)
				}
			}
			s.Archival[j].Tags = tags
		}
	}
	return t
}
