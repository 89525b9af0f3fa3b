package writeup

import (
	"fmt"
	"io/fs"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// Macros is the LaTeX that lets a paper state a fact by its id:
// \fact{best} prints its value (Format), \factpct{best_gain} a fraction as a percentage with one
// decimal; an id that is not a fact stops the compile with its name.
func Macros(facts []rundir.Fact) string {
	var b strings.Builder
	b.WriteString("% The run's facts (" + rundir.FactsFile + "): \\fact{ID} prints one, \\factpct{ID} a fraction as a percentage.\n" +
		"\\makeatletter\n" +
		"\\newcommand{\\fact}[1]{\\@ifundefined{hpcqfact@#1}{\\PackageError{hpcq}{no fact #1 in " + rundir.FactsFile + "}{}}{\\@nameuse{hpcqfact@#1}}}\n" +
		"\\newcommand{\\factpct}[1]{\\@ifundefined{hpcqpct@#1}{\\PackageError{hpcq}{no fact #1 in " + rundir.FactsFile + "}{}}{\\@nameuse{hpcqpct@#1}\\,\\%}}\n")
	for _, f := range facts {
		fmt.Fprintf(&b, "\\@namedef{hpcqfact@%s}{%s}\\@namedef{hpcqpct@%s}{%s}%% %s\n", f.ID, Format(f.Value),
			f.ID, strconv.FormatFloat(100*f.Value, 'f', 1, 64), strings.ReplaceAll(f.Claim, "\n", " "))
	}
	b.WriteString("\\makeatother\n")
	return b.String()
}

// Format writes a value as a paper prints it: four significant digits (a
// number of 1,000 or more in whole units), no exponent between 0.001 and
// 10^7, thousands grouped with {,}.
func Format(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	if a < 1e-3 || a >= 1e7 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	decimals := max(0, 3-int(math.Floor(math.Log10(a))))
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "{,}" + whole[i:]
	}
	if frac != "" {
		whole += "." + frac
	}
	if neg {
		whole = "-" + whole
	}
	return whole
}

var factRefRe = regexp.MustCompile(`\\fact(?:pct)?\s*\{([^}]*)\}`)

// Cited are the fact ids a text states through \fact and \factpct, each
// once, in order, and those among them that are not facts.
func Cited(tex string, facts []rundir.Fact) (ids, unknown []string) {
	known := make(map[string]bool, len(facts))
	for _, f := range facts {
		known[f.ID] = true
	}
	var named []string
	for _, m := range factRefRe.FindAllStringSubmatch(maskComments(tex), -1) {
		named = append(named, m[1])
	}
	return onceEach(named, known)
}

// onceEach are the names (trimmed, empty ones left out) each once, in
// order, and those among them known does not hold.
func onceEach(names []string, known map[string]bool) (ids, unknown []string) {
	seen := map[string]bool{}
	for _, n := range names {
		if n = strings.TrimSpace(n); n == "" || seen[n] {
			continue
		}
		seen[n] = true
		ids = append(ids, n)
		if !known[n] {
			unknown = append(unknown, n)
		}
	}
	return ids, unknown
}

// maskComments blanks LaTeX comments (a % not escaped to the line's end).
func maskComments(tex string) string {
	lines := strings.Split(tex, "\n")
	for i, l := range lines {
		for j := 0; j < len(l); j++ {
			if l[j] == '\\' {
				j++
				continue
			}
			if l[j] == '%' {
				lines[i] = l[:j]
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}

// CheckPaper checks a paper's text, as typeset with the files it inputs
// from inputs (its directory; nil: none), against the facts and the
// numbers the run was given (GivenIn).
func CheckPaper(tex string, inputs fs.FS, facts []rundir.Fact, given Given) rundir.Report {
	t := expand(tex, inputs)
	r := rundir.Report{Claims: check(tex, t, facts, given)}
	r.FactsCited, r.UnknownFacts = Cited(t.text, facts)
	sort.Strings(r.UnknownFacts)
	byID := make(map[string]rundir.Fact, len(facts))
	for _, f := range facts {
		byID[f.ID] = f
	}
	for _, id := range r.FactsCited {
		if f, ok := byID[id]; ok {
			r.Stated = append(r.Stated, f)
		}
	}
	r.Numbers = len(r.Claims)
	for _, c := range r.Claims {
		if c.Verified() {
			r.Verified++
		}
	}
	r.Unverified = r.Numbers - r.Verified
	r.InsideNoise = noiseFindings(t.text, r, byID)
	return r
}
