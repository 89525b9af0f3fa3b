package writeup

import (
	"regexp"
	"strings"

	"github.com/hpcq/hpcq/internal/textcut"
)

// texEnv starts each command of a paper's compile: an environment of
// nothing of the caller's but PATH (TeX may live anywhere a site put it),
// HOME the workspace, and kpathsea's settings that keep TeX inside it:
// openin_any=p (a file is read only from the workspace or found in TeX's
// own tree: no absolute path, no ../, no dot file; \input{/etc/passwd}
// and \openin of /proc/self/environ find nothing), openout_any=p (written
// only in the workspace), shell_escape=f (no \write18 and no \input|cmd,
// not even TeX Live's restricted list; latexmk is also given
// -no-shell-escape, and -norc so that no latexmkrc the paper wrote is
// read). Kpathsea reads its variables from the environment before
// texmf.cnf. The sandbox already gives the compile no network and a file
// system read-only outside its workspace.
const texEnv = `env -i PATH="$PATH" HOME="$PWD" LANG=C.UTF-8 openin_any=p openout_any=p shell_escape=f `

// maxTeXMessages bounds what a failed compile's log gives back.
const maxTeXMessages = 3000

// texMessageRe matches the lines of a compile's output that are TeX's,
// bibtex's and latexmk's own messages: an error ("! ..."), an error in
// -file-line-error form ("./paper.tex:12: ..."), where it stopped
// ("l.12 ..." and the line's rest), a warning, latexmk's summary. The
// rest of a log is what TeX echoes of the files it read: none of the
// host's now (texEnv), but the model and claims.json get only these.
var texMessageRe = regexp.MustCompile(`^(!|l\.\d+ |[^\s:]+\.(tex|sty|cls|bib|bbl|aux):\d+: |(LaTeX|Package|Class) \S* ?(Error|Warning)|Latexmk: |Error: |I couldn't open|---line \d+ of file |Runaway argument|Emergency stop|No pages of output|pdflatex: |rsvg-convert: |pdftoppm: |env: )`)

// texMessages is what a failed compile's output (its log tail) says in
// TeX's own words: the lines texMessageRe matches, and the line after an
// "l.N" line (the rest of the source line TeX stopped in), at most
// maxTeXMessages bytes, the last kept.
func texMessages(log string) string {
	lines := strings.Split(log, "\n")
	var kept []string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], "\r")
		if !texMessageRe.MatchString(l) {
			continue
		}
		kept = append(kept, l)
		if strings.HasPrefix(l, "l.") && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			kept = append(kept, strings.TrimRight(lines[i+1], "\r"))
			i++
		}
	}
	if len(kept) == 0 {
		return "(the compile's output holds no message of TeX's)"
	}
	out := strings.Join(kept, "\n")
	return out[textcut.Ceil(out, len(out)-maxTeXMessages):]
}
