package writeup

import (
	"regexp"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/pkg/schema"
)

// PaperNode is the node id a paper's compile runs as, in its own pool: it
// is the model's code, and runs in the sandbox as any node's does.
const (
	PaperNode = "paper"
	PaperPool = "writeup"
)

// PaperTask compiles paper.tex with the files beside it (facts.tex,
// refs.bib) in a task's sandbox: latexmk -pdf (pdflatex and bibtex as often
// as it takes; an error stops it), then each page rendered to a PNG
// (pdftoppm, 60 dpi: what a reviewing model reads). No network; the
// compile and the render bounded.
func PaperTask(runID string, round int, files map[string]string) *schema.NodeTask {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	ws := make([]schema.File, 0, len(names))
	for _, n := range names {
		ws = append(ws, schema.File{Path: n, Content: files[n]})
	}
	off := false
	return &schema.NodeTask{V: schema.Version, RunID: runID, NodeID: PaperNode, Attempt: max(1, round), Pool: PaperPool,
		Artifacts: schema.Artifacts{
			Coding:  schema.CodingPhase{Workspace: schema.Workspace{Files: ws}},
			Compile: schema.CommandsPhase{Commands: []string{"latexmk -pdf -interaction=nonstopmode -halt-on-error -file-line-error paper.tex"}},
			Run:     schema.RunPhase{Commands: []string{"pdftoppm -r 60 -png paper.pdf page"}, ExpectedOutputs: []string{"paper.pdf"}},
		},
		Limits: schema.Limits{CompileTimeoutS: 300, RunTimeoutS: 120, Network: &off}}
}

var (
	citeRe   = regexp.MustCompile(`\\(?:no)?cite[a-zA-Z]*\*?\s*(?:\[[^\]]*\]\s*)*\{([^}]*)\}`)
	bibKeyRe = regexp.MustCompile(`(?m)^\s*@[a-zA-Z]+\s*\{\s*([^,\s]+)\s*,`)
)

// Citations are the keys a paper cites (each once, in order) and those
// among them that the bibliography the run was given does not hold.
func Citations(tex, bib string) (keys, unknown []string) {
	have := map[string]bool{}
	for _, m := range bibKeyRe.FindAllStringSubmatch(bib, -1) {
		have[m[1]] = true
	}
	var named []string
	for _, m := range citeRe.FindAllStringSubmatch(maskComments(tex), -1) {
		named = append(named, strings.Split(m[1], ",")...)
	}
	return onceEach(named, have)
}
