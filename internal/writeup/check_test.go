package writeup

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
)

func texts(ns []rundir.Number) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Text
	}
	return out
}

// TestNumbers: the literals a reader reads as claims, and what is not one.
func TestNumbers(t *testing.T) {
	tex := `\section{Results}\label{sec:res2}
The best node reached 842.6~GFLOP/s, 3.4\% more than 816.7 (Table~\ref{tab:1}); 1{,}550 and 1,700 MLUP/s.
% 999 in a comment
\includegraphics[width=0.8\linewidth]{fig/plot2.png} On x86 and H2O, sm_90 is not a number; 2pt is a length.
Sizes of 1.5e3 and .25 count, as does 40 \%. See \cite{smith2020} and \fact{F12}.`
	require.Equal(t, []string{"842.6", "3.4", "816.7", "1{,}550", "1,700", "1.5e3", ".25", "40"}, texts(Numbers(tex)))
	ns := Numbers(tex)
	require.Equal(t, 1550.0, ns[3].Value)
	require.InDelta(t, 0.05, ns[0].Rounded, 1e-12)
	require.InDelta(t, 50.0, ns[5].Rounded, 1e-9, "1.5e3 shows hundreds")
	require.True(t, ns[1].Percent)
	require.True(t, ns[7].Percent)
	for _, n := range ns {
		require.Equal(t, n.Text, tex[n.Offset:n.Offset+len(n.Text)], "offsets are the text's")
	}
}

// TestCheck: each literal is matched to the fact it states within its
// printed rounding (a percentage to a fraction too), years and references
// are whitelisted, and an invented number is left unverified with its
// context.
func TestCheck(t *testing.T) {
	facts := []rundir.Fact{{ID: "best", Value: 842.64}, {ID: "base", Value: 816.739}, {ID: "gain", Value: 0.0317}, {ID: "delta", Value: -2.45}}
	tex := `In 2026 the best node (Figure 2) reached 842.6 GFLOP/s against 817 for the baseline, a gain of 3.2\%;
the ablation lost 2.4 and 2.5; an invented 900.0 GFLOP/s and 842.7 are not facts. Stage~3 found it, in 2-D;
a bare 2 is not the delta.`
	var got []string
	var unverified []rundir.Claim
	for _, c := range Check(tex, facts, nil) {
		got = append(got, c.Text+"="+c.FactID+c.Whitelist)
		if !c.Verified() {
			unverified = append(unverified, c)
		}
	}
	require.Equal(t, []string{"2026=year", "2=reference", "842.6=best", "817=base", "3.2=gain", "2.4=delta", "2.5=delta", "900.0=", "842.7=",
		"3=reference", "2=dimension", "2="}, got)
	require.Len(t, unverified, 3)
	require.Contains(t, unverified[0].Context, "an invented 900.0 GFLOP/s")
	require.Equal(t, "2", unverified[2].Text, "a small integer is not 2.45")
	require.Contains(t, unverified[0].Context, "an invented 900.0 GFLOP/s")
}

// TestCheckGiven: a version the run's setup records, and a number its
// idea gives, are written as they are; a number that only looks like part
// of one, or a single digit of the idea, is still a claim.
func TestCheckGiven(t *testing.T) {
	g := GivenIn("- worker local-1 on host vm: gcc 12.2.0, mpi Open MPI 4.1.4, make 4.3\n",
		"A 5-point stencil on an N x N grid (N = 1024, 200 iterations, the edge at 1.0) on x86 with sm90.")
	require.Equal(t, Given{"12.2.0": "version", "4.1.4": "version", "4.3": "version", "1024": "idea", "200": "idea", "1.0": "idea",
		"tool:12.2.0": "gcc", "tool:4.1.4": "mpi", "tool:4.3": "make"}, g)
	tex := `Built with gcc 12.2.0 and Open MPI 4.1.4 (make 4.3); gcc 13.1.0 was not used; it reached 4.1 GFLOP/s on 2 cores ` +
		`for N = 1024 and 200 iterations, 5 times faster, 1024.0 GFLOP/s.`
	var got []string
	for _, c := range Check(tex, nil, g) {
		got = append(got, c.Text+"="+c.Whitelist)
	}
	require.Equal(t, []string{"12.2=version", "4.1=version", "4.3=version", "13.1=", "4.1=", "2=", "1024=idea", "200=idea", "5=", "1024.0="}, got)
}

// FuzzNumbers: any text, LaTeX or not, gives literals that are its own
// bytes at their offsets, finite, and contexts that are valid UTF-8.
func FuzzNumbers(f *testing.F) {
	for _, s := range []string{`842.6~GFLOP/s \label{a1} 3\% % 9`, `\includegraphics[width=.5\linewidth]{a1.png}`, "1{,}550 1,700 1.5e3",
		`\begin{tabular}{lr} a & 12.5 \\ \end{tabular}`, `\cite{x`, `\\%5`, "\xff1.2", "{[[{", `$3.27\times$`, `652.38\,GFLOP/s`,
		`$t = 12.74\,\mathrm{s}$`, `771.43\\`, `4.73x faster`, "five times faster, twice as fast", `$-2.9$ drop`, `1024 \times 1024`,
		"3.2\u00d7 and \u22122.5", `5\,\mathrm{`, `\newcommand{\s}{3.2}\def\g{40\%} \s$\times$ \g \sx`,
		`\newcommand\r{1{,}550\,GFLOP/s} at \r.`, "\\begin{lstlisting}\nsleep(0.01)\n\\end{lstlisting} \\verb|9| \\verb", `\lstinline[x]{1} \lstinline!2`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tex string) {
		for _, c := range Check(tex, []rundir.Fact{{ID: "a", Value: 1}}, nil) {
			require.Equal(t, c.Text, tex[c.Offset:c.Offset+len(c.Text)])
			require.False(t, c.Value != c.Value, "NaN")
			if utf8.ValidString(tex) {
				require.True(t, utf8.ValidString(c.Context))
			}
			require.False(t, strings.ContainsAny(c.Text, " \n"))
		}
	})
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{842.64: "842.6", 816.739: "816.7", 1550: "1{,}550", 1234567: "1{,}234{,}567", 0.0317: "0.0317",
		1.0317: "1.032", -2.45: "-2.45", 0: "0", 3.2e-5: "3.2e-05", 12.0: "12", 25914.3: "25{,}914"} {
		require.Equal(t, want, Format(v), "%v", v)
	}
	// What Format prints checks against its fact.
	for _, v := range []float64{842.64, 1550, 0.0317, 1234567, 25914.3} {
		tex := "we saw " + Format(v) + " here"
		c := Check(tex, []rundir.Fact{{ID: "x", Value: v}}, nil)
		require.Len(t, c, 1, tex)
		require.Equal(t, "x", c[0].FactID, tex)
	}
}

// TestCheckPaper: the facts a paper cites by id, the ones it names that are
// none (a comment's do not count), and its literals' tally.
func TestCheckPaper(t *testing.T) {
	facts := []rundir.Fact{{ID: "best", Value: 842.64}, {ID: "best_gain", Value: 0.0317}}
	tex := `Best: \fact{best} GFLOP/s, \factpct{best_gain} over the draft; \fact{best} again; \fact{made_up}. % \fact{in_comment}
Unchecked: 17.5.`
	r := CheckPaper(tex, nil, facts, nil)
	require.Equal(t, []string{"best", "best_gain", "made_up"}, r.FactsCited)
	require.Equal(t, []string{"made_up"}, r.UnknownFacts)
	require.Equal(t, 1, r.Numbers)
	require.Equal(t, 1, r.Unverified)
	require.Contains(t, Macros(facts), `\@namedef{hpcqfact@best}{842.6}\@namedef{hpcqpct@best}{84264.0}`)
	require.Contains(t, Macros(facts), `\@namedef{hpcqpct@best_gain}{3.2}`)
}
