package writeup

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// stencilFacts are the facts of a finished `make run` (examples/stencil-omp,
// the gate included), as facts.json wrote them.
func stencilFacts(t *testing.T) []rundir.Fact {
	t.Helper()
	data, err := os.ReadFile("testdata/stencil-facts.json")
	require.NoError(t, err)
	var facts []rundir.Fact
	require.NoError(t, json.Unmarshal(data, &facts))
	return facts
}

// stencilGiven is what the same run was given: its workers' toolchains and
// its idea's numbers.
var stencilGiven = GivenIn("- worker local-1 on host vm: gcc 12.2.0, make 4.3, mpi Open MPI 4.1.4, python3 3.11.2\n",
	"A 5-point Jacobi stencil on an N x N grid, N = 1024, 100 sweeps, held-out sizes unseen; report GFLOP/s.")

// spelling is one way a paper writes a number of a kind.
type spelling struct {
	kind   string // the literal kind it is (rundir.Literal*, "" bare)
	format string // %s is the number
	scale  float64
	unit   string // the literal's unit (LiteralUnit)
}

var spellings = []spelling{
	{rundir.LiteralRatio, `The tuned kernel was %sx faster than the baseline.`, 1, ""},
	{rundir.LiteralRatio, `It ran $%s\times$ faster.`, 1, ""},
	{rundir.LiteralRatio, `a %s$\times$ speedup over the draft`, 1, ""},
	{rundir.LiteralRatio, `a speedup of %s times over the draft`, 1, ""},
	{rundir.LiteralPercent, `It was %s\%% faster than its parent.`, 1, ""},
	{rundir.LiteralPercent, `a gain of %s percent over the draft`, 1, ""},
	{rundir.LiteralUnit, `The best kernel reached %s\,GFLOP/s.`, 1, "GFLOP/s"},
	{rundir.LiteralUnit, `It sustained $%s\,\mathrm{GFLOP/s}$ on the grid.`, 1, "GFLOP/s"},
	{rundir.LiteralUnit, `a rate of %s~Gflop/s`, 1, "GFLOP/s"},
	{rundir.LiteralUnit, `Its run took $t = %s\,\mathrm{s}$ in all.`, 1, "s"},
	{rundir.LiteralUnit, `Its run took %s seconds.`, 1, "s"},
	{rundir.LiteralUnit, `Each sweep took %s ms.`, 1000, "ms"},
	{"", `The search grew %s nodes in all.`, 1, ""},
}

// canState: a literal of spelling sp may state a fact of kind k (of unit
// u): the test's own table, written apart from the checker's.
func canState(sp spelling, k, u string) bool {
	switch sp.kind {
	case rundir.LiteralRatio:
		return k == rundir.FactRatio
	case rundir.LiteralPercent:
		return k == rundir.FactFraction || k == rundir.FactRatio
	case rundir.LiteralUnit:
		if sp.unit == "GFLOP/s" {
			return (k == rundir.FactMetric || k == rundir.FactDelta) && u == "GFLOP/s"
		}
		return k == rundir.FactSeconds || k == rundir.FactMetric && u == "s"
	}
	return k == rundir.FactCount || k == rundir.FactMetric || k == rundir.FactDelta
}

// inTermsOf is a fact's value as a literal of sp writes it.
func inTermsOf(sp spelling, f rundir.Fact) float64 {
	switch {
	case sp.kind == rundir.LiteralPercent && f.Kind == rundir.FactRatio:
		return 100 * (f.Value - 1)
	case sp.kind == rundir.LiteralPercent:
		return 100 * f.Value
	}
	return f.Value * sp.scale
}

// inventedPaper is a paper of sentences that each state a number of one
// kind with the digits of a fact of another kind (the speedup that is a
// tool's version, a node's negative delta, a GFLOP/s value, a count), the
// sentences that would be true of their own kind by chance left out.
func inventedPaper(facts []rundir.Fact) (tex string, sentences int) {
	var b strings.Builder
	seen := map[string]bool{}
	values := map[string]float64{"make 4.3": 4.3, "gcc 12.2": 12.2, "Open MPI 4.1": 4.1}
	for _, f := range facts {
		values[f.ID] = f.Value
	}
	for _, v := range values {
		for _, sp := range spellings {
			lit := Format(math.Abs(v))
			if sp.kind == "" && strings.ContainsAny(lit, ".e") {
				continue // a count is whole
			}
			n := Numbers(fmt.Sprintf(sp.format, lit))
			if len(n) != 1 {
				continue
			}
			true_ := false
			for _, g := range facts {
				if canState(sp, g.Kind, g.Unit) && math.Abs(n[0].Value-math.Abs(inTermsOf(sp, g))) <= n[0].Rounded {
					true_ = true // true of its kind by chance
				}
			}
			s := fmt.Sprintf(sp.format, lit)
			if true_ || seen[s] {
				continue
			}
			seen[s] = true
			b.WriteString(s + "\n")
			sentences++
		}
	}
	return b.String(), sentences
}

// TestInventedNumbersOfAnotherKind: no invented sentence verifies against
// a fact of another kind (before: 4 of 60 did, 1 through the idea).
func TestInventedNumbersOfAnotherKind(t *testing.T) {
	facts := stencilFacts(t)
	tex, n := inventedPaper(facts)
	require.Greater(t, n, 300, "the paper has invented sentences of every kind")
	t.Logf("%d invented sentences", n)
	byID := map[string]rundir.Fact{}
	for _, f := range facts {
		byID[f.ID] = f
	}
	claims := Check(tex, facts, stencilGiven)
	t.Logf("%d literals read", len(claims))
	for _, c := range claims {
		require.False(t, c.Verified(), "%q verified as %s%s (%s)", c.Context, c.FactID, c.Whitelist, byID[c.FactID].Kind)
	}
	if out := os.Getenv("HPCQ_INVENTED_PAPER"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(tex), 0o644))
	}
}

// TestTrueNumbersOfTheirKind: every fact written in its own kind's words
// verifies, and so does every \fact.
func TestTrueNumbersOfTheirKind(t *testing.T) {
	facts := stencilFacts(t)
	var b strings.Builder
	for _, f := range facts {
		lit, abs := Format(f.Value), Format(math.Abs(f.Value))
		switch f.Kind {
		case rundir.FactMetric:
			fmt.Fprintf(&b, "It reached %s %s.\n", lit, f.Unit)
		case rundir.FactRatio:
			fmt.Fprintf(&b, "It was %sx faster, %s$\\times$ the baseline, $%s\\times$ it.\n", lit, lit, lit)
		case rundir.FactFraction:
			dir := "higher"
			if f.Value < 0 {
				dir = "lower"
			}
			fmt.Fprintf(&b, "It was %s\\%% %s.\n", Format(100*math.Abs(f.Value)), dir)
		case rundir.FactDelta:
			if f.Value < 0 {
				fmt.Fprintf(&b, "The ablation lost %s %s, a change of $%s$~%s.\n", abs, f.Unit, lit, f.Unit)
			} else {
				fmt.Fprintf(&b, "The child gained %s\\,%s.\n", abs, f.Unit)
			}
		case rundir.FactSeconds:
			fmt.Fprintf(&b, "Its run took %s\\,s, or %s ms.\n", lit, Format(1000*f.Value))
		case rundir.FactCount:
			fmt.Fprintf(&b, "The search grew %s nodes.\n", lit)
		default:
			t.Fatalf("fact %s has no kind", f.ID)
		}
		fmt.Fprintf(&b, "As a fact: \\fact{%s}.\n", f.ID)
	}
	fmt.Fprintf(&b, "Built with gcc 12.2.0 and Open MPI 4.1.4 on an N = 1024 grid of 100 sweeps.\n")
	r := CheckPaper(b.String(), nil, facts, stencilGiven)
	if out := os.Getenv("HPCQ_TRUE_PAPER"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(b.String()), 0o644))
	}
	t.Logf("%d literals read, %d verified", r.Numbers, r.Verified)
	for _, c := range r.Claims {
		require.True(t, c.Verified(), "%q (%s %s) is true and of its kind", c.Context, c.Kind, c.Unit)
	}
	require.Len(t, r.FactsCited, len(facts))
	require.Empty(t, r.UnknownFacts)
}

// TestLiteralKinds: every number read, however it is spelled, with what
// its words say it is.
func TestLiteralKinds(t *testing.T) {
	tex := `A $3.27\times$ speedup, 652.38\,GFLOP/s, $t = 12.74\,\mathrm{s}$, a row ending 771.43\\ and 4.73x faster;
five times faster, 12\% lower, $-2.9$~GFLOP/s, a 1024 x 1024 grid, 1024 \times 1024 too, 3 ms, the 3rd node, 2D tiles,
double buffering, it doubled.`
	type lit struct {
		text, kind, unit string
		neg              bool
		dir              int
	}
	var got []lit
	for _, n := range Numbers(tex) {
		got = append(got, lit{n.Text, n.Kind, n.Unit, n.Negative, n.Direction})
	}
	require.Equal(t, []lit{
		{"3.27", rundir.LiteralRatio, "", false, 1},
		{"652.38", rundir.LiteralUnit, "GFLOP/s", false, 0},
		{"12.74", rundir.LiteralUnit, "s", false, 0},
		{"771.43", "", "", false, 1},
		{"4.73", rundir.LiteralRatio, "", false, 1},
		{"five", rundir.LiteralRatio, "", false, 1},
		{"12", rundir.LiteralPercent, "", false, -1},
		{"2.9", rundir.LiteralUnit, "GFLOP/s", true, 0},
		{"1024", "", "", false, 0}, {"1024", "", "", false, 0}, {"1024", "", "", false, 0}, {"1024", "", "", false, 0},
		{"3", rundir.LiteralUnit, "ms", false, 0},
		{"doubled", rundir.LiteralRatio, "", false, 0},
	}, got)
}

// TestClaimsOfAnotherKind: the sentences a finished run's paper verified
// before numbers had kinds, each now left unverified; and the same words
// with the numbers that are true of their kind.
func TestClaimsOfAnotherKind(t *testing.T) {
	facts := []rundir.Fact{
		{ID: "n0007.gflops", Value: 4.6, Unit: "GFLOP/s", Kind: rundir.FactMetric},
		{ID: "n0003.gflops", Value: 3.16, Unit: "GFLOP/s", Kind: rundir.FactMetric},
		{ID: "n0008.delta", Value: -2.88, Unit: "GFLOP/s", Kind: rundir.FactDelta},
		{ID: "best_over_baseline", Value: 1.51, Kind: rundir.FactRatio},
		{ID: "best_gain", Value: 0.51, Kind: rundir.FactFraction},
	}
	given := GivenIn("make 4.3, gcc 12.2.0\n", "N = 1024")
	for tex, want := range map[string]string{
		"The tuned kernel was 4.3x faster.":                 "",
		"The tuned kernel was 2.9x faster.":                 "",
		"The tuned kernel was 4.6x faster.":                 "",
		"an invented 3.2x speedup":                          "",
		"a gain of 2.88 GFLOP/s":                            "",
		"51\\% slower than the draft":                       "",
		"The tuned kernel was 1.51x faster.":                "best_over_baseline",
		"51\\% faster than the draft":                       "best_gain",
		"151\\% of the draft's rate":                        "best_over_baseline",
		"the ablation lost 2.88 GFLOP/s":                    "n0008.delta",
		"a change of $-2.88$ GFLOP/s":                       "n0008.delta",
		"it reached 4.6 GFLOP/s":                            "n0007.gflops",
		"built with make 4.3":                               "version",
		"a 1024$\\times$ speedup":                           "",
		"on N = 1024":                                       "idea",
		"1.5 times faster, not twice as fast":               "best_over_baseline",
		"It ran 4.6\\,GFLOP/s, $3.16\\,\\mathrm{GFLOP/s}$.": "n0007.gflops n0003.gflops",
	} {
		var ids []string
		for _, c := range Check(tex, facts, given) {
			if c.Verified() {
				ids = append(ids, c.FactID+c.Whitelist)
			}
		}
		require.Equal(t, want, strings.Join(ids, " "), tex)
	}
}

// TestNumbersInMacros: a number a paper prints through a macro of its own
// is read where the macro is used, with the kind its body or the text
// after it gives; its definition and a comment's use are not.
func TestNumbersInMacros(t *testing.T) {
	tex := `\newcommand{\speedup}{3.2}
\newcommand\rate{652.4\,GFLOP/s}
\def\gain{40\%}
\renewcommand{\note}{see below}
% \speedup in a comment
The kernel ran \speedup$\times$ faster at \rate, a gain of \gain; \speedupx is another macro.`
	var got []string
	for _, n := range Numbers(tex) {
		got = append(got, n.Text+"="+strconv.FormatFloat(n.Value, 'g', -1, 64)+":"+n.Kind+":"+n.Unit)
		require.Equal(t, n.Text, tex[n.Offset:n.Offset+len(n.Text)])
	}
	require.Equal(t, []string{`\speedup=3.2:ratio:`, `\rate=652.4:unit:GFLOP/s`, `\gain=40:percent:`}, got)
	facts := []rundir.Fact{{ID: "best_over_baseline", Value: 3.21, Kind: rundir.FactRatio}, {ID: "n0003.gflops", Value: 3.2, Unit: "GFLOP/s", Kind: rundir.FactMetric}}
	var verified []string
	for _, c := range Check(tex, facts, nil) {
		verified = append(verified, c.Text+"="+c.FactID)
	}
	require.Equal(t, []string{`\speedup=best_over_baseline`, `\rate=`, `\gain=`}, verified, "an invented number hidden in a macro is a claim like any other")
}

// TestCodeIsNoClaim: the numbers of code a paper quotes (a listing's port
// and sleep, \verb, \lstinline) are not claims; the text around them is
// read.
func TestCodeIsNoClaim(t *testing.T) {
	tex := "The server took 13ms a round trip.\n\\begin{lstlisting}[language=Python]\nserve(handler, \"0.0.0.0\", 8765)\ntime.sleep(0.01)\n\\end{lstlisting}\n" +
		"It calls \\verb|sleep(0.5)| and \\lstinline{x = 42} and \\lstinline[language=C]!n = 7!; then 100\\% arrived.\n\\begin{verbatim}\n99 bottles\n\\end{verbatim}\n"
	var got []string
	for _, n := range Numbers(tex) {
		got = append(got, n.Text+":"+n.Kind+":"+n.Unit)
	}
	require.Equal(t, []string{"13:unit:ms", "100:percent:"}, got)
}
