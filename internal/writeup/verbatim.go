// Code a paper quotes: its numbers are the code's (a port, a sleep), not
// claims.

package writeup

import (
	"regexp"
	"strings"
)

// verbatimEnvRe is code a paper quotes in an environment.
var verbatimEnvRe = regexp.MustCompile(`(?s)\\begin\{(?:verbatim\*?|Verbatim|lstlisting|minted|code)\}.*?\\end\{(?:verbatim\*?|Verbatim|lstlisting|minted|code)\}`)

// maskVerbatim blanks the code a paper quotes in masked: verbatim-like
// environments, \verb|...| and \lstinline (|...| or {...}).
func maskVerbatim(tex, masked string) string {
	b := []byte(masked)
	for _, l := range verbatimEnvRe.FindAllStringIndex(tex, -1) {
		blankRange(b, l[0], l[1])
	}
	for _, cmd := range []string{`\verb`, `\lstinline`} {
		for i := 0; ; {
			k := strings.Index(tex[i:], cmd)
			if k < 0 {
				break
			}
			s, j := i+k, i+k+len(cmd)
			e := verbEnd(tex, j)
			if e > j {
				blankRange(b, s, e)
			}
			i = e
		}
	}
	return string(b)
}

// verbEnd is the end of \verb|...| or \lstinline[..]{...} whose name ends
// at j (j itself when it is another command: \verbatim, \verbx).
func verbEnd(t string, j int) int {
	k := j
	if k < len(t) && t[k] == '*' {
		k++
	}
	if k < len(t) && t[k] == '[' {
		k = matching(t, k)
	}
	if k >= len(t) || isLetter(t[k]) || t[k] == ' ' || t[k] == '\n' {
		return j
	}
	end := t[k]
	if end == '{' {
		end = '}'
	}
	e := strings.IndexAny(t[k+1:], string(end)+"\n")
	if e < 0 {
		return len(t)
	}
	return k + 2 + e
}
