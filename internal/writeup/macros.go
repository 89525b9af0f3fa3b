// Numbers a paper prints through macros of its own: \newcommand{\speedup}{3.2}
// and then "a \speedup$\times$ speedup" states 3.2x where \speedup stands.

package writeup

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// macroDefRe is the definition of a macro without parameters: \newcommand,
// \renewcommand, \providecommand (braced name or not), \def; its body
// without nested groups beyond one level.
var macroDefRe = regexp.MustCompile(`\\(?:(?:re|provide)?newcommand\*?\s*(?:\{\s*\\([a-zA-Z@]+)\s*\}|\\([a-zA-Z@]+))|def\s*\\([a-zA-Z@]+))\s*\{((?:[^{}]|\{[^{}]*\})*)\}`)

// maskDefinitions blanks the paper's macro definitions in masked (a
// number in a body is read where the macro is used, not where it is made).
func maskDefinitions(tex, masked string) string {
	locs := macroDefRe.FindAllStringIndex(tex, -1)
	if len(locs) == 0 {
		return masked
	}
	b := []byte(masked)
	for _, l := range locs {
		blankRange(b, l[0], l[1])
	}
	return string(b)
}

// verbatimEnvRe is code a paper quotes in an environment: its numbers
// are the code's (a port, a sleep), not claims.
var verbatimEnvRe = regexp.MustCompile(`(?s)\\begin\{(?:verbatim\*?|Verbatim|lstlisting|minted|code)\}.*?\\end\{(?:verbatim\*?|Verbatim|lstlisting|minted|code)\}`)

// maskVerbatim blanks the code a paper quotes in masked: verbatim-like
// environments, \verb|...| and \lstinline (|...| or {...}).
func maskVerbatim(tex, masked string) string {
	b := []byte(masked)
	blank := func(i, j int) { blankRange(b, i, j) }
	for _, l := range verbatimEnvRe.FindAllStringIndex(tex, -1) {
		blank(l[0], l[1])
	}
	for _, cmd := range []string{`\verb`, `\lstinline`} {
		for i := 0; ; {
			k := strings.Index(tex[i:], cmd)
			if k < 0 {
				break
			}
			s := i + k
			j := s + len(cmd)
			if j < len(tex) && tex[j] == '*' {
				j++
			}
			if j < len(tex) && tex[j] == '[' { // \lstinline[language=C]
				if e := strings.IndexByte(tex[j:], ']'); e >= 0 {
					j += e + 1
				}
			}
			if j >= len(tex) || isLetter(tex[j]) || tex[j] == ' ' || tex[j] == '\n' {
				i = j
				continue // \verbatim, \verbx: another command
			}
			end := byte(tex[j])
			if end == '{' {
				end = '}'
			}
			e := strings.IndexAny(tex[j+1:], string(end)+"\n")
			if e < 0 {
				e = len(tex) - j - 1
			}
			blank(s, j+2+e)
			i = min(len(tex), j+2+e)
		}
	}
	return string(b)
}

// numberMacros are the paper's macros without parameters whose body is a
// number (with what may follow it: 3.2, 1{,}550, 3.2\times, 40\%), by name.
func numberMacros(tex string) map[string]string {
	out := map[string]string{}
	for _, m := range macroDefRe.FindAllStringSubmatch(tex, -1) {
		name := m[1] + m[2] + m[3]
		body := strings.TrimSpace(m[4])
		if loc := numberRe.FindStringIndex(body); loc != nil && loc[0] == 0 {
			out[name] = body
		}
	}
	return out
}

// macroNumbers are the uses of tex's number macros where the text (masked:
// not in comments or the arguments of skipArgs, the definitions included)
// reads them, each a literal whose text is the macro's name and whose
// value, rounding and kind are its body's (the kind: what follows the
// number in the body, else what follows the use).
func macroNumbers(tex, masked string) []rundir.Number {
	macros := numberMacros(tex)
	if len(macros) == 0 {
		return nil
	}
	var out []rundir.Number
	for name, body := range macros {
		use := `\` + name
		for i := 0; ; {
			j := strings.Index(tex[i:], use)
			if j < 0 {
				break
			}
			s, e := i+j, i+j+len(use)
			i = e
			if masked[s] != '\\' || e < len(tex) && isLetter(tex[e]) {
				continue // masked (a comment, a definition), or a longer name
			}
			loc := numberRe.FindStringIndex(body)
			clean := strings.NewReplacer("{,}", "", ",", "").Replace(body[:loc[1]])
			v, err := strconv.ParseFloat(clean, 64)
			if err != nil || math.IsInf(v, 0) {
				continue
			}
			kind, unit, _ := after(body, loc[1])
			if kind == "" && strings.TrimSpace(body[loc[1]:]) == "" {
				kind, unit, _ = after(tex, e)
			}
			out = append(out, rundir.Number{Offset: s, Text: use, Value: v, Rounded: halfUnit(clean), Percent: kind == rundir.LiteralPercent,
				Kind: kind, Unit: unit, Negative: negative(tex, s), Direction: direction(tex, s, e)})
		}
	}
	return out
}
