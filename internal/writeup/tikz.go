// A picture's coordinates are not claims; what it prints is. In a
// tikzpicture (pgfplots' axes inside it) or a picture environment only the
// labels a reader sees are read (node {...}, \put(..){...}) and the values
// a plot draws (the y of \addplot coordinates {(x,y) ...}: a number a
// figure shows is a claim like the text's; its x is where it is drawn).

package writeup

import (
	"regexp"
	"strings"
)

var pictureEnvs = []string{"tikzpicture", "picture"}

// nodeRe finds where a picture prints text: a node (\node, node, \put).
var nodeRe = regexp.MustCompile(`(?:\\node|\bnode|\\put)\b|\\addplot\+?`)

// coordRe is one (x,y) of a plot's coordinates; its group the y.
var coordRe = regexp.MustCompile(`\(\s*[^(),]*,\s*([^(),]*?)\s*\)`)

// maskPictures blanks, in masked, the pictures of tex but for what they print.
func maskPictures(tex, masked string) string {
	if !strings.Contains(tex, `\begin{`) {
		return masked
	}
	b := []byte(masked)
	for _, env := range pictureEnvs {
		begin, end := `\begin{`+env+`}`, `\end{`+env+`}`
		for i := 0; ; {
			k := strings.Index(tex[i:], begin)
			if k < 0 {
				break
			}
			s := i + k
			e := strings.Index(tex[s:], end)
			if e < 0 {
				e = len(tex) - s
			}
			e += s
			blankExcept(b, s, e, printed(tex, s, e))
			i = min(len(tex), e+len(end))
		}
	}
	return string(b)
}

// printed are the ranges of tex[s:e], a picture, that it prints.
func printed(tex string, s, e int) [][2]int {
	var keep [][2]int
	for _, loc := range nodeRe.FindAllStringIndex(tex[s:e], -1) {
		k := s + loc[1]
		plot := strings.HasPrefix(tex[s+loc[0]:], `\addplot`)
		k = labelAt(tex, k, e, plot)
		if k >= e || tex[k] != '{' {
			continue
		}
		g := min(e, matching(tex, k))
		if !plot {
			keep = append(keep, [2]int{k + 1, g - 1})
			continue
		}
		for _, c := range coordRe.FindAllStringSubmatchIndex(tex[k:g], -1) {
			keep = append(keep, [2]int{k + c[2], k + c[3]})
		}
	}
	return keep
}

// labelAt is where the label of a node whose keyword ends at k begins
// (a "{" there), past its options, its name, "at (x,y)" and a plot's
// "coordinates".
func labelAt(tex string, k, e int, plot bool) int {
	for k < e {
		k = skipSpace(tex, k)
		switch {
		case k < e && (tex[k] == '[' || tex[k] == '('):
			k = matchingParen(tex, k)
		case strings.HasPrefix(tex[k:], "at ") || strings.HasPrefix(tex[k:], "at(") || plot && strings.HasPrefix(tex[k:], "coordinates"):
			j := strings.IndexAny(tex[k:e], " ({")
			if j < 0 {
				return e
			}
			k += j
		default:
			return k
		}
	}
	return k
}

// matchingParen is the offset after the ( or [ at open that closes it.
func matchingParen(tex string, open int) int {
	if tex[open] == '[' {
		return matching(tex, open)
	}
	depth := 0
	for k := open; k < len(tex); k++ {
		switch tex[k] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return k + 1
			}
		}
	}
	return len(tex)
}

// blankExcept blanks b[s:e] but for the ranges in keep.
func blankExcept(b []byte, s, e int, keep [][2]int) {
	for _, k := range keep {
		blankRange(b, s, k[0])
		s = max(s, k[1])
	}
	blankRange(b, s, e)
}
