// What a paper's words say a number is: the unit or marker written after
// it (3.2$\times$, 40\%, 652.38\,GFLOP/s, 12.74\,\mathrm{s}, 4.73x), its
// sign, the direction of change the sentence gives it, and numbers
// written as words ("five times faster", "twice").

package writeup

import (
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hpcq/hpcq/internal/hostbound"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// glue is what may stand between a number and its unit: spaces, ties,
// TeX's thin spaces, math shifts, empty groups.
var glue = []string{`\,`, `\;`, `\:`, `\!`, `\ `, `\thinspace`, `{}`, "~", "$", " ", "\t", "\n"}

// unitArgs are commands whose braced argument is a unit.
var unitArgs = []string{`\mathrm{`, `\text{`, `\textrm{`, `\mbox{`, `\mathit{`, `\si{`, `\unit{`, `\textit{`, `\operatorname{`}

// after is what is written after a literal ending at e: its kind and unit
// (Number.Kind, Number.Unit); word is set when the literal is part of a
// word instead (1st, 3GHz-less text like 2D or 1a): not a number.
func after(tex string, e int) (kind, unit string, word bool) {
	i := e
	for moved := true; moved && i < len(tex); {
		moved = false
		for _, g := range glue {
			if strings.HasPrefix(tex[i:], g) && !(g == `\ ` && i+2 < len(tex) && isLetter(tex[i+2])) {
				i += len(g)
				moved = true
				break
			}
		}
	}
	rest := tex[i:]
	attached := i == e
	switch {
	case hasCommand(rest, `\times`), strings.HasPrefix(rest, "×"):
		if product(rest) {
			return "", "", false // 1024 \times 1024: a size
		}
		return rundir.LiteralRatio, "", false
	case strings.HasPrefix(rest, `\%`):
		return rundir.LiteralPercent, "", false
	case strings.HasPrefix(rest, "-fold"):
		return rundir.LiteralRatio, "", false
	}
	for _, c := range unitArgs {
		if strings.HasPrefix(rest, c) {
			end := strings.IndexByte(rest[len(c):], '}')
			if end < 0 {
				return "", "", false
			}
			k, u := classify(strings.ReplaceAll(rest[len(c):len(c)+end], `\,`, ""))
			return k, u, false
		}
	}
	j := 0
	for j < len(rest) {
		r, size := utf8.DecodeRuneInString(rest[j:])
		if !(r < utf8.RuneSelf && (isLetter(byte(r)) || r == '/' && j > 0)) && r != 'µ' {
			break
		}
		j += size
	}
	token := strings.TrimRight(rest[:j], "/")
	if token == "" {
		return "", "", false
	}
	k, u := classify(token)
	if k == rundir.LiteralRatio && strings.EqualFold(token, "x") && product(rest) {
		return "", "", false // 1024 x 1024: a size
	}
	if k == "" && attached {
		return "", "", true // 1st, 2D, 3GHz: a word, or a unit hpcq does not read
	}
	return k, u, false
}

// product: the times sign at the start of rest is followed by a number
// (1024 x 1024, 2 \times 3): a size or a product, not a ratio.
func product(rest string) bool {
	_, size := utf8.DecodeRuneInString(rest)
	if strings.HasPrefix(rest, `\times`) {
		size = len(`\times`)
	}
	r := strings.TrimLeft(rest[size:], " ~$\\,{}")
	return r != "" && (r[0] >= '0' && r[0] <= '9' || r[0] == 'N' && (len(r) == 1 || !isLetter(r[1])))
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// hasCommand: s starts with the control word cmd (not a longer one).
func hasCommand(s, cmd string) bool {
	return strings.HasPrefix(s, cmd) && (len(s) == len(cmd) || !isLetter(s[len(cmd)]))
}

// classify is the kind of a word written after a number.
func classify(token string) (kind, unit string) {
	t := strings.TrimSpace(token)
	switch strings.ToLower(t) {
	case "x", "times", "fold":
		return rundir.LiteralRatio, ""
	case "percent":
		return rundir.LiteralPercent, ""
	}
	if _, ok := hostbound.ParseTime(t); ok {
		if len(t) > 3 {
			t = strings.ToLower(t)
		}
		return rundir.LiteralUnit, t
	}
	if _, ok := hostbound.ParseRate(t); ok || strings.Contains(t, "/") {
		return rundir.LiteralUnit, t
	}
	return "", ""
}

// unitScale is a unit's factor to its base (seconds, FLOP/s, bytes a
// second) and the family it is of; ok false for a unit of neither.
func unitScale(unit string) (family string, scale float64, ok bool) {
	if s, ok := hostbound.ParseTime(unit); ok {
		return "s", s, true
	}
	if r, ok := hostbound.ParseRate(unit); ok {
		if r.Flops {
			return "FLOP/s", r.Scale, true
		}
		return "B/s", r.Scale, true
	}
	return "", 0, false
}

// sameUnit: a value in unit a is one in unit b times factor.
func sameUnit(a, b string) (factor float64, ok bool) {
	fa, sa, oka := unitScale(a)
	fb, sb, okb := unitScale(b)
	if oka && okb && fa == fb {
		return sa / sb, true
	}
	norm := func(u string) string { return strings.ToLower(strings.ReplaceAll(u, " ", "")) }
	return 1, !oka && !okb && norm(a) == norm(b) && a != ""
}

var (
	upRe   = regexp.MustCompile(`(?i)\b(faster|higher|more|above|gain|improv|increas|speed-?ups?|better|outperform|ahead)`)
	downRe = regexp.MustCompile(`(?i)\b(slower|lower|less|below|drop|loss|lost|decreas|fell|fall|regress|worse|slow-?down|behind|degrad)`)
)

// direction is what the words around a literal at [s, e) say of a
// change, within its clause: the nearest after it, else before it.
func direction(tex string, s, e int) int {
	post := tex[e:min(len(tex), e+48)]
	if i := strings.IndexAny(post, ".;:,"); i >= 0 && (i+1 == len(post) || post[i+1] == ' ' || post[i+1] == '\n') {
		post = post[:i]
	}
	up, down := upRe.FindStringIndex(post), downRe.FindStringIndex(post)
	switch {
	case up != nil && (down == nil || up[0] < down[0]):
		return 1
	case down != nil:
		return -1
	}
	pre := tex[max(0, s-40):s]
	if i := strings.LastIndexAny(pre, ".;:,"); i >= 0 {
		pre = pre[i+1:]
	}
	ups, downs := upRe.FindAllStringIndex(pre, -1), downRe.FindAllStringIndex(pre, -1)
	switch {
	case len(ups) > 0 && (len(downs) == 0 || ups[len(ups)-1][0] > downs[len(downs)-1][0]):
		return 1
	case len(downs) > 0:
		return -1
	}
	return 0
}

// negative: a minus sign right before the literal at s ($-2.9$, -2.9,
// −2.9), not a range's dash (1--4) or a hyphen in a word.
func negative(tex string, s int) bool {
	pre := strings.TrimRight(tex[:s], " $")
	switch {
	case strings.HasSuffix(pre, "−"):
		return true
	case strings.HasSuffix(pre, "-"):
		p := strings.TrimSuffix(pre, "-")
		if p == "" {
			return true
		}
		last := p[len(p)-1]
		return !(last == '-' || isLetter(last) || last >= '0' && last <= '9')
	}
	return false
}

// wordNumberRe finds numbers written as words that state a ratio.
var wordNumberRe = regexp.MustCompile(`(?i)\b(?:(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred)[- ](?:times|fold)\b|(twice|thrice)\s+(?:as|the|faster|slower|higher|lower|more|less)\b|(doubled|tripled|quadrupled|halved)\b)`)

var wordValues = map[string]float64{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
	"ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100,
	"twice": 2, "thrice": 3, "doubled": 2, "tripled": 3, "quadrupled": 4, "halved": 0.5}

// wordNumbers are the ratios a text states in words ("five times
// faster", "twice as fast", "three-fold", "doubled"), as literals whose
// text is the number's word ("double buffering" and "ran twice" are not).
func wordNumbers(tex, masked string) []rundir.Number {
	var out []rundir.Number
	for _, m := range wordNumberRe.FindAllStringSubmatchIndex(masked, -1) {
		s, e := -1, -1
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] >= 0 {
				s, e = m[g], m[g+1]
				break
			}
		}
		w := strings.ToLower(tex[s:e])
		v := wordValues[w]
		out = append(out, rundir.Number{Offset: s, Text: tex[s:e], Value: v, Rounded: math.Min(0.5, v/4), Kind: rundir.LiteralRatio,
			Direction: direction(tex, s, m[1])})
	}
	return out
}
