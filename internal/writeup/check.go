package writeup

import (
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// numberRe finds numeric literals: digits with an optional thousands
// grouping (1,550 or 1{,}550 as LaTeX writes it), a fraction, an exponent
// (1.5e3, or 1.5\times10^{3} is read as two numbers: both must check).
// A sign is not read ("1--4" is a range, "-3.2" a delta whose sign the
// words carry): literals and facts are compared by magnitude.
var numberRe = regexp.MustCompile(`(?:\d{1,3}(?:(?:,|\{,\})\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+`)

// skipArgs are the commands whose braced argument is not prose: labels,
// references, citation keys, file names, lengths, colours, environments.
var skipArgs = []string{`\label`, `\ref`, `\eqref`, `\autoref`, `\cref`, `\cite`, `\citep`, `\citet`, `\includegraphics`,
	`\input`, `\include`, `\bibliography`, `\bibliographystyle`, `\usepackage`, `\documentclass`, `\begin`, `\end`,
	`\hspace`, `\vspace`, `\setlength`, `\color`, `\textcolor`, `\url`, `\href`, `\fact`, `\newcommand`, `\renewcommand`}

// Numbers are the numeric literals of a LaTeX text a reader would read as
// claims, read as TeX typesets it (expand.go: the paper's own macros
// expanded, siunitx's quantities written out), with what the text says
// each is (literal.go: 3.2$\times$ a ratio, 40\% a percentage,
// 652.38\,GFLOP/s and 12.74\,\mathrm{s} a value in a unit, 4.73x a
// ratio; its sign and the direction of change its sentence gives it), and
// the ratios written in words ("five times faster"). A number a macro
// prints is reported where the macro is used (its Text the macro's name).
// Not read: comments, the arguments of skipArgs (and their optional [..]
// argument), a command's name (\section*; h2o in \textsubscript is still
// read), a length (0.8\linewidth, 2pt, 1em), a digit run inside a word
// (H2O, x86, sm_90, 1st, 2D), code (verbatim, lstlisting, minted
// environments; \verb, \lstinline), a picture's coordinates (tikz.go).
func Numbers(tex string) []rundir.Number {
	t := expand(tex, nil)
	nums := numbersIn(t.text)
	for i := range nums {
		nums[i] = t.locate(nums[i], tex)
	}
	return nums
}

// numbersIn are the numbers of a typeset text, at its own offsets.
func numbersIn(tex string) []rundir.Number {
	masked := maskPictures(tex, maskVerbatim(tex, maskTeX(tex)))
	var out []rundir.Number
	for _, loc := range numberRe.FindAllStringIndex(masked, -1) {
		s, e := loc[0], loc[1]
		if s > 0 && isWordByte(masked[s-1]) || e < len(masked) && (masked[e] == '_' || masked[e] >= '0' && masked[e] <= '9') {
			continue
		}
		if isLength(tex[e:]) {
			continue
		}
		kind, unit, word := after(tex, e)
		if word {
			continue
		}
		text := masked[s:e]
		clean := strings.NewReplacer("{,}", "", ",", "").Replace(text)
		v, err := strconv.ParseFloat(clean, 64)
		if err != nil || math.IsInf(v, 0) {
			continue
		}
		out = append(out, rundir.Number{Offset: s, Text: tex[s:e], Value: v, Rounded: halfUnit(clean),
			Percent: kind == rundir.LiteralPercent, Kind: kind, Unit: unit, Negative: negative(tex, s), Direction: direction(tex, s, e)})
	}
	words := wordNumbers(tex, masked)
	if len(words) == 0 {
		return out
	}
	out = append(out, words...)
	sort.Slice(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	return out
}

// halfUnit is half a unit of the last digit a literal shows.
func halfUnit(lit string) float64 {
	mant, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant = lit[:i]
		exp, _ = strconv.Atoi(lit[i+1:])
	}
	decimals := 0
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		decimals = len(mant) - i - 1
	}
	return 0.5 * math.Pow(10, float64(exp-decimals))
}

func isWordByte(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '\\'
}

var lengthRe = regexp.MustCompile(`^\s*(?:pt|em|ex|cm|mm|in|bp|\\(?:linewidth|textwidth|columnwidth|textheight|baselineskip))`)

func isLength(rest string) bool { return lengthRe.MatchString(rest) }

// maskTeX blanks (with spaces, keeping every offset) what is not prose:
// comments, command names and the arguments of skipArgs.
func maskTeX(tex string) string {
	b := []byte(tex)
	blank := func(i, j int) { blankRange(b, i, j) }
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '%':
			if i > 0 && tex[i-1] == '\\' {
				continue
			}
			j := strings.IndexByte(tex[i:], '\n')
			if j < 0 {
				j = len(tex) - i
			}
			blank(i, i+j)
			i += j
		case '\\':
			j := i + 1
			for j < len(tex) && (tex[j] >= 'a' && tex[j] <= 'z' || tex[j] >= 'A' && tex[j] <= 'Z' || tex[j] == '@') {
				j++
			}
			name := tex[i:j]
			if j == i+1 { // a control symbol: \%, \,, \\ ...
				if j < len(tex) && tex[j] == '%' {
					i = j
				}
				continue
			}
			blank(i+1, j) // the name itself (keeps the backslash, a word byte)
			if skipped(name) {
				k := j
				for k < len(tex) && (tex[k] == '*' || tex[k] == ' ') {
					k++
				}
				for k < len(tex) && (tex[k] == '[' || tex[k] == '{') {
					end := matching(tex, k)
					blank(k, end)
					k = end
					for k < len(tex) && tex[k] == ' ' {
						k++
					}
				}
				j = k
			}
			i = j - 1
		}
	}
	return string(b)
}

// blankRange blanks b[i:j] with spaces, keeping its newlines (and so every
// offset and line).
func blankRange(b []byte, i, j int) {
	for ; i < j && i < len(b); i++ {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
}

func skipped(name string) bool {
	for _, s := range skipArgs {
		if name == s {
			return true
		}
	}
	return false
}

// matching is the offset after the bracket or brace that closes the one at
// open (the end of tex when none does).
func matching(tex string, open int) int {
	o, c := tex[open], byte('}')
	if o == '[' {
		c = ']'
	}
	depth := 0
	for k := open; k < len(tex); k++ {
		switch tex[k] {
		case '\\':
			k++
		case o:
			depth++
		case c:
			depth--
			if depth == 0 {
				return k + 1
			}
		}
	}
	return len(tex)
}

// refWordRe is a word before which a small integer names a part of the
// paper or of the search (Figure 2, Table~1, Stage 3), not a result.
var refWordRe = regexp.MustCompile(`(?i)(?:figure|fig\.|table|tab\.|section|sec\.|appendix|equation|eq\.|stage|algorithm|line|step)\s*~?\s*$`)

// Given are the numbers a run was given or recorded beside its results,
// as written, and where each is from: the dotted versions of its setup
// ("version": 12.2.0 of gcc 12.2.0, 4.1.4 of Open MPI 4.1.4; the key
// "tool:" + the version names the tool, the word before it) and the
// numbers of its research idea of two digits or more, or with a fraction
// ("idea": N = 1024, 200 iterations). A paper may write a version beside
// its tool, an idea's number as a value (not as a ratio or percentage);
// claims.json says which they are. No single-digit integer: it would let
// any small claim pass.
type Given map[string]string

var (
	versionRe  = regexp.MustCompile(`(?:([A-Za-z][A-Za-z0-9+_-]*)\s+)?(\d+(?:\.\d+)+)`)
	ideaNumRe  = regexp.MustCompile(`\d+(?:\.\d+)?`)
	wordDigits = regexp.MustCompile(`[A-Za-z_]\d`)
)

// GivenIn are the numbers of a run's setup and idea a paper may write.
func GivenIn(setup, idea string) Given {
	g := Given{}
	for _, loc := range ideaNumRe.FindAllStringIndex(idea, -1) {
		m := idea[loc[0]:loc[1]]
		if (len(m) >= 2 || strings.Contains(m, ".")) && (loc[0] == 0 || !wordDigits.MatchString(idea[loc[0]-1:loc[0]+1])) {
			g[m] = "idea"
		}
	}
	for _, m := range versionRe.FindAllStringSubmatch(setup, -1) {
		g[m[2]] = "version"
		if m[1] != "" {
			g["tool:"+m[2]] = strings.ToLower(m[1])
		}
	}
	return g
}

// besideTool: the tool whose version v is is named within the few words
// before the literal at off ("gcc 12.2", "Open MPI 4.1.4"; not "make"
// far away, nor no tool at all: "4.3x faster" is no version of make).
func besideTool(tex string, off int, v string, given Given) bool {
	tool := given["tool:"+v]
	if tool == "" {
		return false
	}
	pre := strings.ToLower(tex[max(0, off-24):off])
	i := strings.LastIndex(pre, tool)
	return i >= 0 && (i == 0 || !isLetter(pre[i-1])) && strings.TrimLeft(pre[i+len(tool):], " ~v(") == ""
}

// version is the whole dotted number a literal is part of (12.2.0 for the
// 12.2 of "gcc 12.2.0").
func version(tex string, n rundir.Number) string {
	s, e := n.Offset, n.Offset+len(n.Text)
	for s > 0 && (tex[s-1] >= '0' && tex[s-1] <= '9' || tex[s-1] == '.') {
		s--
	}
	for e < len(tex) && (tex[e] >= '0' && tex[e] <= '9' || tex[e] == '.' && e+1 < len(tex) && tex[e+1] >= '0' && tex[e+1] <= '9') {
		e++
	}
	return strings.Trim(tex[s:e], ".")
}

// whitelisted says why a number needs no fact, or "": a version the run's
// setup records, beside its tool; a number its idea gives (as written), as
// a value; a year, a small integer naming a figure, table, section or
// stage, or a dimension (2-D), written bare. Never a ratio or percentage.
func whitelisted(tex string, n rundir.Number, given Given) string {
	if n.Kind == rundir.LiteralRatio || n.Kind == rundir.LiteralPercent {
		return "" // a ratio or a percentage is a result, whatever its digits
	}
	if v := version(tex, n); strings.Contains(v, ".") && given[v] == "version" && n.Kind == "" && besideTool(tex, n.Offset, v, given) {
		return "version"
	}
	if given[n.Text] == "idea" {
		return "idea"
	}
	if n.Rounded != 0.5 || n.Kind != "" {
		return ""
	}
	rest := tex[n.Offset+len(n.Text):]
	switch {
	case n.Value >= 1900 && n.Value <= 2100 && len(n.Text) == 4:
		return "year"
	case n.Value <= 99 && refWordRe.MatchString(tex[max(0, n.Offset-16):n.Offset]):
		return "reference"
	case n.Value <= 4 && (strings.HasPrefix(rest, "-D") || strings.HasPrefix(rest, "-d")):
		return "dimension"
	}
	return ""
}

// matches reports whether the number states the fact: of a kind its
// words allow (states), and equal within the rounding its digits show
// (and a relative 1e-9 for the float's own).
func matches(n rundir.Number, f rundir.Fact) bool {
	for _, want := range states(n, f) {
		if near(n, want) {
			return true
		}
	}
	return false
}

// near: the literal, as printed, is want by magnitude. A bare small
// integer states only a whole value: "2" is not 2.097 (so many facts lie
// within half a unit of a small integer that it would match by chance;
// write the fact, or its digits).
func near(n rundir.Number, want float64) bool {
	v, want := math.Abs(n.Value), math.Abs(want)
	if n.Rounded >= 0.5 && want < 10 && want != math.Trunc(want) {
		return false
	}
	return math.Abs(v-want) <= n.Rounded+1e-9*want
}

// states are the values of f that n may state, in n's terms: none when
// its words say it is of another kind (a ratio is never a GFLOP/s value,
// a version or a delta) or of the other sign (2.9x faster is not a
// slowdown; a drop is not a gain). A fact of an earlier hpcq, without a
// kind, is stated by any literal of its value (a percentage: of 100x it).
func states(n rundir.Number, f rundir.Fact) []float64 {
	down := n.Negative || n.Direction < 0
	signOK := func(v float64) bool { return v >= 0 && !down || v < 0 && down || v == 0 }
	switch {
	case f.Kind == "":
		if n.Percent {
			return []float64{f.Value, 100 * f.Value}
		}
		return []float64{f.Value}
	case n.Kind == rundir.LiteralRatio:
		switch {
		case f.Kind != rundir.FactRatio || n.Negative || f.Value <= 0:
			return nil
		case n.Direction < 0 && f.Value < 1:
			return []float64{f.Value, 1 / f.Value} // 0.66x, or 1.5x slower
		case n.Direction < 0 || n.Direction > 0 && f.Value < 1:
			return nil
		}
		return []float64{f.Value}
	case n.Kind == rundir.LiteralPercent:
		switch f.Kind {
		case rundir.FactFraction:
			if signOK(f.Value) {
				return []float64{100 * f.Value}
			}
		case rundir.FactRatio:
			if n.Direction == 0 && !n.Negative {
				return []float64{100 * f.Value} // at 66% of the baseline's
			}
			if signOK(f.Value - 1) {
				return []float64{100 * (f.Value - 1)}
			}
		case rundir.FactMetric:
			if f.Unit == "%" {
				return []float64{f.Value}
			}
		}
		return nil
	case n.Kind == rundir.LiteralUnit:
		unit := f.Unit
		switch f.Kind {
		case rundir.FactSeconds:
			unit = "s"
		case rundir.FactDelta:
			if !signOK(f.Value) {
				return nil
			}
		case rundir.FactMetric:
		default:
			return nil
		}
		if k, ok := sameUnit(unit, n.Unit); ok {
			return []float64{f.Value * k}
		}
		return nil
	}
	switch f.Kind { // a bare number: a value of the metric, a count, a delta
	case rundir.FactMetric:
		return []float64{f.Value}
	case rundir.FactCount:
		if n.Value == math.Trunc(n.Value) && !strings.ContainsAny(n.Text, ".eE") {
			return []float64{f.Value}
		}
	case rundir.FactDelta:
		if signOK(f.Value) {
			return []float64{f.Value}
		}
	}
	return nil
}

// Check reads every numeric literal of tex as a claim and finds the fact
// it states (the first that matches) or the whitelist's reason (given:
// what the run was given or recorded beside its results; nil for none);
// the claims neither accounts for are the paper's unverified numbers.
func Check(tex string, facts []rundir.Fact, given Given) []rundir.Claim {
	return check(tex, expand(tex, nil), facts, given)
}

// check is Check of tex as typeset (t): its words and context are t's,
// each claim reported where tex has it.
func check(tex string, t typeset, facts []rundir.Fact, given Given) []rundir.Claim {
	nums := numbersIn(t.text)
	claims := make([]rundir.Claim, 0, len(nums))
	for _, n := range nums {
		c := rundir.Claim{Number: n, Context: around(t.text, n.Offset, len(n.Text))}
		if c.Whitelist = whitelisted(t.text, n, given); c.Whitelist == "" {
			// A fact of the kind the words name first (40\% higher: the
			// fraction), then one they may also state (the ratio).
			for pass := 0; pass < 2 && c.FactID == ""; pass++ {
				for _, f := range facts {
					if (n.Kind == rundir.LiteralPercent && f.Kind == rundir.FactRatio) == (pass == 1) && matches(n, f) {
						c.FactID, c.Node, c.SQL = f.ID, f.Node, f.SQL
						break
					}
				}
			}
		}
		c.Number = t.locate(n, tex)
		claims = append(claims, c)
	}
	return claims
}

// around is the line of text around a literal, at most 60 bytes each side,
// cut at valid UTF-8.
func around(tex string, off, n int) string {
	s, e := max(0, off-60), min(len(tex), off+n+60)
	for s > 0 && s < len(tex) && tex[s]&0xC0 == 0x80 {
		s--
	}
	for e < len(tex) && tex[e]&0xC0 == 0x80 {
		e++
	}
	return strings.Join(strings.Fields(tex[s:e]), " ")
}
