package writeup

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// PaperNode is the node id a paper's compile runs as, in its own pool: it
// is the model's code, and runs in the sandbox as any node's does.
const (
	PaperNode = "paper"
	PaperPool = "writeup"
)

// PaperTask compiles paper.tex with the files beside it (facts.tex,
// refs.bib, the figures: an SVG whose path is plain, letters, digits and
// ._/-, made a PDF by rsvg-convert) in a task's sandbox: latexmk -pdf (pdflatex and
// bibtex as often as it takes; an error stops it; 2 minutes, a TeX loop
// included), then each page rendered to a PNG (pdftoppm, 60 dpi: what a
// reviewing model reads; the first MaxPages). No network; bounded. Every
// command runs with texEnv: the paper is the model's, and TeX would
// otherwise read any file the sandbox sees and print it into the PDF.
func PaperTask(runID string, round int, files []schema.File) *schema.NodeTask {
	ws := append([]schema.File(nil), files...)
	sort.Slice(ws, func(i, j int) bool { return ws[i].Path < ws[j].Path })
	var compile []string
	for _, f := range ws {
		if strings.HasSuffix(f.Path, ".svg") && plainPathRe.MatchString(f.Path) {
			// pdflatex includes no SVG: a plot becomes the PDF the paper names.
			compile = append(compile, texEnv+"rsvg-convert -f pdf -o "+strings.TrimSuffix(f.Path, ".svg")+".pdf "+f.Path)
		}
	}
	compile = append(compile, texEnv+"latexmk -norc -pdf -no-shell-escape -interaction=nonstopmode -halt-on-error -file-line-error "+rundir.PaperTeX)
	off := false
	return &schema.NodeTask{V: schema.Version, RunID: runID, NodeID: PaperNode, Attempt: max(1, round), Pool: PaperPool,
		Artifacts: schema.Artifacts{
			Coding:  schema.CodingPhase{Workspace: schema.Workspace{Files: ws}},
			Compile: schema.CommandsPhase{Commands: compile},
			Run: schema.RunPhase{Commands: []string{fmt.Sprintf(texEnv+"pdftoppm -r 60 -l %d -png %s %s", MaxPages, rundir.PaperPDF, rundir.PagePrefix)},
				ExpectedOutputs: []string{rundir.PaperPDF}},
		},
		Limits: schema.Limits{CompileTimeoutS: 120, RunTimeoutS: 120, Network: &off}}
}

// plainPathRe: a path a command line may hold as it is.
var plainPathRe = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// MaxPages bounds the pages rendered: a paper that makes thousands of
// pages (a loop in its LaTeX) renders its first MaxPages.
const MaxPages = 30

// Compiler compiles a run's paper as a task (the LaTeX is the model's
// code: in the sandbox, never as the scheduler's own user) and brings
// paper.pdf and the pages' PNGs into Dir.
type Compiler struct {
	// Run executes a task (an executor.Executor's Execute) and says where
	// its workspace is.
	Run   func(ctx context.Context, task *schema.NodeTask) (res *schema.NodeResult, workspace string, err error)
	RunID string
	// Dir is the run's paper directory: paper.pdf and pages/page-N.png.
	Dir string
}

// maxPDFBytes bounds what a compile brings home of a file.
const maxPDFBytes = 256 << 20

// Compile compiles one round's files; a paper that fails gives Compiled.Error
// with the failing phase's log tail.
func (c Compiler) Compile(ctx context.Context, round int, files []schema.File) (Compiled, error) {
	task := PaperTask(c.RunID, round, files)
	res, wsDir, err := c.Run(ctx, task)
	if err != nil {
		return Compiled{}, fmt.Errorf("writeup: compile: %w", err)
	}
	if res.Error != nil {
		tail := ""
		for _, p := range res.Phases {
			if p.Name == res.Error.Phase {
				tail = p.LogTail
			}
		}
		return Compiled{Error: strings.TrimSpace(res.Error.Message + "\n" + texMessages(tail))}, nil
	}
	ws, err := os.OpenRoot(wsDir)
	if err != nil {
		return Compiled{}, err
	}
	defer ws.Close()
	out := Compiled{PDF: filepath.Join(c.Dir, rundir.PaperPDF)}
	if err := copyOut(ws, rundir.PaperPDF, out.PDF); err != nil {
		return Compiled{}, err
	}
	pagesDir := filepath.Join(c.Dir, rundir.PagesDir)
	if err := os.RemoveAll(pagesDir); err != nil {
		return Compiled{}, err
	}
	if err := os.MkdirAll(pagesDir, 0o755); err != nil {
		return Compiled{}, err
	}
	pngs, _ := filepath.Glob(filepath.Join(wsDir, rundir.PagePrefix+"-*.png"))
	slices.SortFunc(pngs, func(a, b string) int { return rundir.PageNumber(a) - rundir.PageNumber(b) })
	for _, p := range pngs {
		dst := filepath.Join(pagesDir, filepath.Base(p))
		if err := copyOut(ws, filepath.Base(p), dst); err != nil {
			return Compiled{}, err
		}
		out.Pages = append(out.Pages, dst)
	}
	return out, nil
}

// copyOut copies a file the sandboxed compile wrote, within maxPDFBytes.
func copyOut(ws *os.Root, name, dst string) error {
	data, err := readRegular(ws, name, maxPDFBytes)
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(dst, data)
}

// readRegular reads a file under root only if it is a regular file (never
// a link or a pipe a sandboxed program may have left), at most limit bytes.
func readRegular(root *os.Root, name string, limit int) ([]byte, error) {
	f, _, err := fileio.OpenRegular(root, name)
	if err != nil {
		return nil, fmt.Errorf("writeup: %s: %w", name, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("writeup: %s: %w", name, err)
	}
	if len(data) > limit {
		return nil, fmt.Errorf("writeup: %s: over %d bytes", name, limit)
	}
	return data, nil
}

// Figures a paper may include: at most MaxFigures of at most
// MaxFigureBytes each (the workspace's limit per file, decoded).
const (
	MaxFigures     = 6
	MaxFigureBytes = 4 << 20
)

// FigureFiles are the figures a writeup left in dir/figures, as a
// compile's files: regular files only (a directory or a link is not a
// figure), each within MaxFigureBytes.
func FigureFiles(dir string) ([]schema.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	entries, err := os.ReadDir(filepath.Join(dir, rundir.FiguresDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var files []schema.File
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		name := path.Join(rundir.FiguresDir, e.Name())
		data, err := readRegular(root, name, MaxFigureBytes)
		if err != nil {
			return nil, err
		}
		files = append(files, schema.File{Path: name, Content: base64.StdEncoding.EncodeToString(data), Encoding: schema.EncodingBase64})
	}
	return files, nil
}

var (
	citeRe   = regexp.MustCompile(`\\(?:no)?cite[a-zA-Z]*\*?\s*(?:\[[^\]]*\]\s*)*\{([^}]*)\}`)
	bibKeyRe = regexp.MustCompile(`(?m)^\s*@[a-zA-Z]+\s*\{\s*([^,\s]+)\s*,`)
)

// Citations are the keys a paper cites (each once, in order), through
// \cite and its kin or an alias the paper makes of them, or as an entry of
// a thebibliography it writes itself, and those among them that the
// bibliography the run was given does not hold.
func Citations(tex, bib string) (keys, unknown []string) {
	have := map[string]bool{}
	for _, m := range bibKeyRe.FindAllStringSubmatch(bib, -1) {
		have[m[1]] = true
	}
	var named []string
	text := maskComments(tex)
	for _, m := range citeCommands(text).FindAllStringSubmatch(text, -1) {
		for _, k := range strings.Split(m[1], ",") {
			if !strings.Contains(k, "#") { // a macro's parameter: \newcommand{\mycite}[1]{\cite{#1}}
				named = append(named, k)
			}
		}
	}
	// A bibliography the paper writes itself holds what the run was not
	// given: each entry's key is a citation to check.
	named = append(named, bibitems(text)...)
	return onceEach(named, have)
}

// BibKeys are the keys of a bibliography's entries, in order.
func BibKeys(bib string) []string {
	var keys []string
	for _, e := range bibEntries(bib) {
		keys = append(keys, e.key)
	}
	return keys
}

// bibEntry is what a prompt says of a bibliography entry.
type bibEntry struct{ key, title string }

var bibTitleRe = regexp.MustCompile(`(?i)\btitle\s*=\s*`)

// bibEntries reads each entry's key and title from BibTeX: enough for the
// model to choose what to cite (the entries themselves are bibtex's to
// read; github.com/nickng/bibtex is not served here).
func bibEntries(bib string) []bibEntry {
	var out []bibEntry
	locs := bibKeyRe.FindAllStringSubmatchIndex(bib, -1)
	for i, m := range locs {
		end := len(bib)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		e := bibEntry{key: bib[m[2]:m[3]]}
		body := bib[m[1]:end]
		if t := bibTitleRe.FindStringIndex(body); t != nil {
			e.title = bibValue(body[t[1]:])
		}
		out = append(out, e)
	}
	return out
}

// bibValue is a field's value: braced (nested braces kept, the outer ones
// dropped) or quoted, on one line, at most 300 bytes.
func bibValue(s string) string {
	if s == "" {
		return ""
	}
	var v string
	switch s[0] {
	case '{':
		depth := 0
		for i := 0; i < len(s); i++ {
			if s[i] == '{' {
				depth++
			} else if s[i] == '}' {
				if depth--; depth == 0 {
					v = s[1:i]
					break
				}
			}
		}
	case '"':
		if j := strings.IndexByte(s[1:], '"'); j >= 0 {
			v = s[1 : j+1]
		}
	}
	v = strings.Join(strings.Fields(v), " ")
	if len(v) > 300 {
		v = strings.ToValidUTF8(v[:300], "") + "..."
	}
	return v
}

// A Reference is a paper the run was given other than by refs.bib (a
// resources.yaml item of class paper): what a bibliography entry needs.
type Reference struct {
	Name, URL, Path, Summary string
}

var keyCharRe = regexp.MustCompile(`[^a-z0-9]+`)

// ReferencesBib appends to bib an entry (@misc) for each reference, keyed
// by its name (lowercase letters and digits; a key bib already has gets a
// suffix), its text escaped for LaTeX.
func ReferencesBib(bib string, refs []Reference) string {
	if len(refs) == 0 {
		return bib
	}
	taken := map[string]bool{}
	for _, k := range BibKeys(bib) {
		taken[k] = true
	}
	var b strings.Builder
	b.WriteString(bib)
	if bib != "" && !strings.HasSuffix(bib, "\n") {
		b.WriteString("\n")
	}
	for i, r := range refs {
		key := keyCharRe.ReplaceAllString(strings.ToLower(r.Name), "")
		if key == "" {
			key = fmt.Sprintf("resource%d", i+1)
		}
		for base, n := key, 2; taken[key]; n++ {
			key = fmt.Sprintf("%s%d", base, n)
		}
		taken[key] = true
		fmt.Fprintf(&b, "\n@misc{%s,\n  title = {%s}", key, texEscape(r.Name))
		where := r.URL
		if where == "" {
			where = r.Path
		}
		note := strings.TrimSpace(strings.Join([]string{r.Summary, where}, ". "))
		if note = strings.Trim(note, ". "); note != "" {
			fmt.Fprintf(&b, ",\n  note = {%s}", texEscape(note))
		}
		b.WriteString("\n}\n")
	}
	return b.String()
}

// texEscape makes text safe inside a BibTeX field printed by LaTeX.
func texEscape(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	r := strings.NewReplacer(`\`, `\textbackslash{}`, `{`, `\{`, `}`, `\}`, `&`, `\&`, `%`, `\%`, `$`, `\$`, `#`, `\#`, `_`, `\_`,
		`^`, `\^{}`, `~`, `\~{}`)
	return r.Replace(s)
}
