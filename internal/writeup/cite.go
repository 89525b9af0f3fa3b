// Which commands cite: \cite and its kin, the aliases a paper makes of
// them (\let\mycite\cite, \newcommand{\mycite}[1]{\cite{#1}}), and the
// entries of a bibliography the paper writes itself (thebibliography's
// \bibitem).

package writeup

import (
	"regexp"
	"strings"
)

// aliasRe finds a command the paper defines as a citation: \let, \def,
// \newcommand, \renewcommand, \providecommand, \DeclareRobustCommand whose
// body starts with (or is) a \cite command.
var aliasRe = regexp.MustCompile(`\\(?:let\s*\\([a-zA-Z@]+)\s*=?\s*|def\s*\\([a-zA-Z@]+)[^{]*\{\s*|(?:re)?newcommand\*?\s*\{?\s*\\([a-zA-Z@]+)\s*\}?\s*(?:\[[^\]]*\]\s*)*\{\s*|providecommand\*?\s*\{?\s*\\([a-zA-Z@]+)\s*\}?\s*(?:\[[^\]]*\]\s*)*\{\s*|DeclareRobustCommand\*?\s*\{?\s*\\([a-zA-Z@]+)\s*\}?\s*(?:\[[^\]]*\]\s*)*\{\s*)\\(?:no)?cite[a-zA-Z]*\b`)

// citeCommands is the regexp of the paper's citing commands, its key list
// the first group: \cite and its kin, and the aliases tex defines.
func citeCommands(tex string) *regexp.Regexp {
	var aliases []string
	for _, m := range aliasRe.FindAllStringSubmatch(tex, -1) {
		for _, name := range m[1:] {
			if name != "" {
				aliases = append(aliases, regexp.QuoteMeta(name))
			}
		}
	}
	if len(aliases) == 0 {
		return citeRe
	}
	return regexp.MustCompile(`\\(?:(?:no)?cite[a-zA-Z]*|` + strings.Join(aliases, "|") + `)\*?\s*(?:\[[^\]]*\]\s*)*\{([^}]*)\}`)
}

// bibitemRe is an entry of a bibliography the paper writes itself.
var bibitemRe = regexp.MustCompile(`\\bibitem\s*(?:\[[^\]]*\]\s*)?\{([^}]*)\}`)

// bibitems are the keys of the paper's own thebibliography entries.
func bibitems(tex string) []string {
	var keys []string
	for _, m := range bibitemRe.FindAllStringSubmatch(tex, -1) {
		keys = append(keys, strings.TrimSpace(m[1]))
	}
	return keys
}

// removeBibitems takes the entries of drop out of the paper's own
// bibliography: each \bibitem up to the next one or the environment's end.
func removeBibitems(tex string, drop map[string]bool) string {
	var b strings.Builder
	last := 0
	locs := bibitemRe.FindAllStringSubmatchIndex(tex, -1)
	for i, m := range locs {
		if !drop[strings.TrimSpace(tex[m[2]:m[3]])] {
			continue
		}
		end := len(tex)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if e := strings.Index(tex[m[1]:end], `\end{thebibliography}`); e >= 0 {
			end = m[1] + e
		}
		b.WriteString(tex[last:m[0]])
		last = end
	}
	b.WriteString(tex[last:])
	return b.String()
}
