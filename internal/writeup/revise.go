package writeup

import (
	"regexp"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// RemoveCitations takes the keys in drop out of the paper's citing
// commands (its aliases too) and its own bibliography's entries; a command
// left with no key goes, with the space or tie before it.
func RemoveCitations(tex string, drop []string) string {
	if len(drop) == 0 {
		return tex
	}
	gone := make(map[string]bool, len(drop))
	for _, k := range drop {
		gone[k] = true
	}
	tex = removeBibitems(tex, gone)
	var b strings.Builder
	last := 0
	for _, m := range citeCommands(maskComments(tex)).FindAllStringSubmatchIndex(tex, -1) {
		var keep []string
		for _, k := range strings.Split(tex[m[2]:m[3]], ",") {
			if k = strings.TrimSpace(k); k != "" && !gone[k] {
				keep = append(keep, k)
			}
		}
		start := m[0]
		if len(keep) == 0 && start > last && (tex[start-1] == '~' || tex[start-1] == ' ') {
			start--
		}
		b.WriteString(tex[last:start])
		if len(keep) > 0 {
			b.WriteString(tex[m[0]:m[2]] + strings.Join(keep, ",") + tex[m[3]:m[1]])
		}
		last = m[1]
	}
	b.WriteString(tex[last:])
	return b.String()
}

var (
	factsInputRe = regexp.MustCompile(`\\input\s*\{\s*facts(?:\.tex)?\s*\}`)
	beginDocRe   = regexp.MustCompile(`\\begin\s*\{document\}`)
	maketitleRe  = regexp.MustCompile(`\\maketitle\b`)
)

// withFacts puts \input{facts.tex} before \begin{document} when the paper
// does not load the macros itself (its \fact would not compile).
func withFacts(tex string) string {
	if factsInputRe.MatchString(maskComments(tex)) {
		return tex
	}
	loc := beginDocRe.FindStringIndex(tex)
	if loc == nil {
		return tex
	}
	return tex[:loc[0]] + `\input{` + rundir.FactsTeX + "}\n" + tex[loc[0]:]
}

// unverifiedNote is what the first page of a paper with an unverified
// number says (no digit in it: the note itself states no number).
const unverifiedNote = "\\noindent\\fbox{\\parbox{0.96\\linewidth}{\\textbf{Unverified numbers.} This paper states numbers that " +
	"hpcq could not match to the run's results: they are listed in " + rundir.ClaimsFile + ", and a reader should not trust them.}}\\par\\medskip\n"

// withWarning puts the unverified-numbers note on the paper's first page:
// after \maketitle, else at the start of the document.
func withWarning(tex string) string {
	doc := beginDocRe.FindStringIndex(tex)
	if doc == nil {
		return tex
	}
	at := doc[1]
	if t := maketitleRe.FindStringIndex(tex[at:]); t != nil {
		at += t[1]
	}
	return tex[:at] + "\n" + unverifiedNote + tex[at:]
}
