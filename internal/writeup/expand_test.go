package writeup

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// read lists a text's numbers as text@offset=value:kind:unit, checking
// each is where the source has it.
func read(t *testing.T, tex string, nums []rundir.Number) []string {
	t.Helper()
	var got []string
	for _, n := range nums {
		require.Equal(t, n.Text, tex[n.Offset:n.Offset+len(n.Text)])
		got = append(got, n.Text+"="+strconv.FormatFloat(n.Value, 'g', -1, 64)+":"+n.Kind+":"+n.Unit)
	}
	return got
}

// TestMacrosWithParameters: a paper's macros with parameters, an optional
// argument's default, \def's #1, \NewDocumentCommand and \let are read as
// typeset; a number the caller passes is where the caller wrote it, one
// the body prints is the use's.
func TestMacrosWithParameters(t *testing.T) {
	tex := `\newcommand{\speed}[2]{#1$\times$ faster than #2}
\newcommand{\rate}[2][GFLOP/s]{#2\,#1}
\def\gain#1{#1\%}
\newcommand*\best[1]{#1 reached 842.6\,GFLOP/s}
\NewDocumentCommand{\tput}{O{GB/s} m}{#2~#1}
\let\sp\speed
The tuned kernel ran \speed{3.2}{the draft}, at \rate{652.4} and \rate[ms]{12.7}; a \gain{40} gain.
\best{The blocked kernel} \sp{1.5}{x} \tput{26.6} \tput[MB/s]{900}.`
	require.Equal(t, []string{"3.2=3.2:ratio:", "652.4=652.4:unit:GFLOP/s", "12.7=12.7:unit:ms", "40=40:percent:",
		`\best=842.6:unit:GFLOP/s`, "1.5=1.5:ratio:", "26.6=26.6:unit:GB/s", "900=900:unit:MB/s"}, read(t, tex, Numbers(tex)))
	n := Numbers(tex)[0]
	require.Equal(t, 1, n.Direction, "the body's words (faster) give its direction")

	facts := []rundir.Fact{{ID: "best_over_baseline", Value: 3.21, Kind: rundir.FactRatio}}
	c := Check(tex, facts, nil)
	require.Equal(t, "best_over_baseline", c[0].FactID)
	require.Contains(t, c[0].Context, `3.2$\times$ faster than the draft`, "the context is the sentence as typeset")
	require.Equal(t, "", c[4].FactID, "an invented number in a macro's body is a claim")
	require.Equal(t, `842.6 (printed by \best)`, c[4].Shown())
	require.Equal(t, "3.2", c[0].Shown())

	// \fact through a macro is cited by the id the use passes.
	r := CheckPaper(`\newcommand{\F}[1]{\fact{#1}} Best: \F{best}.`, nil, []rundir.Fact{{ID: "best", Value: 1}}, nil)
	require.Equal(t, []string{"best"}, r.FactsCited)
	require.Empty(t, r.UnknownFacts)
}

// TestSIUnits: siunitx's quantities are numbers in their units.
func TestSIUnits(t *testing.T) {
	tex := `\DeclareSIUnit\gf{GFLOP/s}
It reached \SI{652.38}{\giga\flops} (\qty{1.2}{\tera\flops} peak), \SI[round-mode=places]{12.74}{\second} a run,
\qty{26.6}{\giga\byte\per\second}, \SI{40}{\percent} of the bound, \num{1234} rows, \SI{3.5}{\gf} and \SIrange{2}{4}{\milli\second}.`
	require.Equal(t, []string{"652.38=652.38:unit:GFLOP/s", "1.2=1.2:unit:TFLOP/s", "12.74=12.74:unit:s", "26.6=26.6:unit:GB/s",
		"40=40:percent:", "1234=1234::", "3.5=3.5:unit:GFLOP/s", "2=2::", "4=4:unit:ms"}, read(t, tex, Numbers(tex)))
	facts := []rundir.Fact{{ID: "best", Value: 652.384, Unit: "GFLOP/s", Kind: rundir.FactMetric}}
	require.Equal(t, "best", Check(`\SI{652.38}{\giga\flops}`, facts, nil)[0].FactID)
	require.Equal(t, "", Check(`\SI{652.38}{\milli\second}`, facts, nil)[0].FactID, "a metric is no time")
}

// TestInputs: the files a paper inputs are read from its directory (a
// claim in one reported at the \input); a path out of it, a file that is
// not there and hpcq's facts file are not.
func TestInputs(t *testing.T) {
	inputs := fstest.MapFS{
		"results.tex":       {Data: []byte(`The kernel reached 842.6\,GFLOP/s, \input{sections/more}.`)},
		"sections/more.tex": {Data: []byte(`3.2x faster`)},
		"facts.tex":         {Data: []byte(`\@namedef{hpcqfact@best}{842.6}`)},
		"loop.tex":          {Data: []byte(`\input{loop} 7`)},
	}
	tex := `Intro. \input{results} \include{missing} \input{../secret} \input{facts} \input{loop}`
	r := CheckPaper(tex, inputs, nil, nil)
	var got []string
	for _, c := range r.Claims {
		got = append(got, c.Text+"@"+strconv.Itoa(c.Offset)+"="+strconv.FormatFloat(c.Value, 'g', -1, 64)+":"+c.Kind)
	}
	require.Equal(t, []string{`\input@7=842.6:unit`, `\input@7=3.2:ratio`, `\input@73=7:`, `\input@73=7:`, `\input@73=7:`,
		`\input@73=7:`, `\input@73=7:`, `\input@73=7:`, `\input@73=7:`, `\input@73=7:`}, got, "an input inputting itself stops %d deep", maxInputs)
	require.Contains(t, r.Claims[0].Context, "The kernel reached 842.6")

	// On disk, through the directory's root: a link out of it is not read.
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.tex")
	require.NoError(t, os.WriteFile(outside, []byte("99.9x faster"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "leak.tex")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.tex"), []byte("1.5x faster"), 0o600))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	r = CheckPaper(`\input{leak} \input{ok}`, root.FS(), nil, nil)
	require.Len(t, r.Claims, 1)
	require.Equal(t, 1.5, r.Claims[0].Value)
}

// TestPictures: a picture's coordinates are not read; its labels and
// the values a plot draws are.
func TestPictures(t *testing.T) {
	tex := `\begin{tikzpicture}[scale=0.8]
\draw[->] (0,0) -- (4.5,2) node[above right] at (3,1) {3.2x faster};
\node (a) at (1,2) {842.6 GFLOP/s};
\begin{axis}[xmin=0, xmax=2048, ylabel={GFLOP/s}]
\addplot+[mark=*] coordinates {(64,1.5) (1024, 4.25)};
\end{axis}
\end{tikzpicture}
\begin{picture}(100,50)\put(10,20){7.5 ms}\end{picture} After: 12.5 ms.`
	require.Equal(t, []string{"3.2=3.2:ratio:", "842.6=842.6:unit:GFLOP/s", "1.5=1.5::", "4.25=4.25::", "7.5=7.5:unit:ms", "12.5=12.5:unit:ms"},
		read(t, tex, Numbers(tex)))
}

// TestExpansionBounded: a macro that calls itself, or doubles itself,
// ends (the expansion is bounded), and the text after it is read.
func TestExpansionBounded(t *testing.T) {
	for _, tex := range []string{`\def\a{\a}\a 2.5x`, `\def\a{\a\a}\a 2.5x`, `\newcommand{\b}[1]{\b{#1#1}}\b{x} 2.5x`,
		`\def\c{\c 9}\c 2.5x`, `\newcommand\x{\newcommand\x{1}\x}\x 2.5x`} {
		start := time.Now()
		nums := Numbers(tex)
		require.Less(t, time.Since(start), 20*time.Second, tex)
		require.NotEmpty(t, nums, tex)
		require.Equal(t, 2.5, nums[len(nums)-1].Value, tex)
	}
}

// FuzzTypeset: any text expands, within its budget, to bytes each traced
// to a byte of the source (a copied byte to itself).
func FuzzTypeset(f *testing.F) {
	for _, s := range []string{`\newcommand{\s}[2][a]{#1#2}\s{x}\s[y]{z}`, `\def\a#1#2{#2#1}\a12`, `\let\b\a\b`, `\SI{1}{\giga\flops}`,
		`\NewDocumentCommand\q{O{1}m}{#1#2}\q{2}`, `\input{x}`, `\def\a{\a\a}\a`, `\newcommand{\x}`, `\def\y#1.{#1}`, "\\%\\verb|\\a|",
		`\begin{tikzpicture}\node at (1,2) {3};\addplot coordinates {(1,2)};\end{tikzpicture}`, `\SIrange{1}{2}`, `\newcommand{\z}[9]{#9}\z`} {
		f.Add(s)
	}
	inputs := fstest.MapFS{"x.tex": {Data: []byte(`\input{x}\def\a{\a\a}\a`)}}
	f.Fuzz(func(t *testing.T, tex string) {
		out := expand(tex, inputs)
		require.Len(t, out.from, len(out.text))
		require.Len(t, out.lit, len(out.text))
		require.LessOrEqual(t, len(out.text), 64*(len(tex)+(16<<10)), "bounded")
		for i := range out.text {
			require.True(t, out.from[i] >= 0 && out.from[i] < len(tex), "from %d", out.from[i])
			if out.lit[i] {
				require.Equal(t, tex[out.from[i]], out.text[i])
			} else {
				require.True(t, strings.HasPrefix(tex[out.from[i]:], `\`), "printed by a command")
			}
		}
		for _, c := range CheckPaper(tex, inputs, nil, nil).Claims {
			require.Equal(t, c.Text, tex[c.Offset:c.Offset+len(c.Text)])
		}
	})
}
