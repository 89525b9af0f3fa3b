package tests

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hpcq/hpcq/"

// programs are the binaries of the layout table's "in" column.
var programs = map[byte]string{'S': "cmd/scheduler", 'W': "cmd/worker", 'B': "cmd/slurm-bridge", 'X': "cmd/hpcq-sandbox"}

// layoutRow is a row of docs/decisions.md's layout table.
type layoutRow struct {
	pkgs    []string
	in      string // program letters, or "tests"
	imports []string
	anyBut  []string // "any package above but ...": imports are the rows above less these
	index   int
}

// planned: the row's package is to come (its "in" is "planned (…)").
func (r layoutRow) planned() bool { return strings.HasPrefix(r.in, "planned") }

var backticked = regexp.MustCompile("`([^`]+)`")

// readLayout reads the table that follows "| package | in | owns | imports |".
func readLayout(t *testing.T) []layoutRow {
	t.Helper()
	f, err := os.Open("../docs/decisions.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []layoutRow
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| package | in | owns | imports |"):
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			return rows
		}
		cols := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cols) != 4 {
			t.Fatalf("layout row with %d columns (package | in | owns | imports): %s", len(cols), line)
		}
		r := layoutRow{in: strings.TrimSpace(cols[1]), index: len(rows)}
		for _, m := range backticked.FindAllStringSubmatch(cols[0], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		deps := strings.TrimSpace(cols[3])
		if rest, ok := strings.CutPrefix(deps, "any package above but "); ok {
			for _, m := range backticked.FindAllStringSubmatch(rest, -1) {
				r.anyBut = append(r.anyBut, m[1])
			}
			if r.anyBut == nil {
				r.anyBut = []string{}
			}
		} else if deps != "none" {
			for _, m := range backticked.FindAllStringSubmatch(deps, -1) {
				r.imports = append(r.imports, m[1])
			}
		}
		rows = append(rows, r)
	}
	t.Fatal("docs/decisions.md has no layout table (| package | in | owns | imports |)")
	return nil
}

// goList runs go list with a template over patterns, one line per package.
func goList(t *testing.T, format string, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// hpcqOnly keeps the module's packages of a list, without the module prefix.
func hpcqOnly(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rel, ok := strings.CutPrefix(p, module); ok {
			out = append(out, rel)
		}
	}
	return out
}

// TestLayout: the layout map of docs/decisions.md is what go list says: every
// package of internal/, pkg/ and deploy/ has a row, imports only the packages
// its row names (all from rows above it), and is linked by exactly the
// programs its row names; plus the rules that keep each program to its own
// side.
func TestLayout(t *testing.T) {
	t.Parallel()
	rows := readLayout(t)
	rowOf := map[string]layoutRow{}
	for _, r := range rows {
		for _, p := range r.pkgs {
			if _, dup := rowOf[p]; dup {
				t.Errorf("%s has two rows", p)
			}
			rowOf[p] = r
		}
	}

	imports := map[string][]string{}
	for _, line := range goList(t, "{{.ImportPath}} {{join .Imports \" \"}}", "../internal/...", "../pkg/...", "../deploy/...") {
		f := strings.Fields(line)
		imports[strings.TrimPrefix(f[0], module)] = hpcqOnly(f[1:])
	}
	// A planned row: its package is not there yet, and may import only rows
	// above it.
	for _, r := range rows {
		if !r.planned() {
			continue
		}
		for _, p := range r.pkgs {
			if _, ok := imports[p]; ok {
				t.Errorf("%s has landed: its row in docs/decisions.md still says %q (say which programs link it)", p, r.in)
			}
		}
		for _, q := range r.imports {
			if qr, ok := rowOf[q]; !ok || qr.index >= r.index {
				t.Errorf("the planned row of %v lists %s, which has no row above it", r.pkgs, q)
			}
		}
	}
	linkedBy := map[string]string{}
	for _, letter := range slices.Sorted(maps.Keys(programs)) {
		for _, p := range hpcqOnly(goList(t, "{{.ImportPath}}", "-deps", "../"+programs[letter])) {
			linkedBy[p] += string(letter)
		}
	}

	for _, p := range slices.Sorted(maps.Keys(imports)) {
		r, ok := rowOf[p]
		if !ok {
			t.Errorf("%s has no row in docs/decisions.md's layout table", p)
			continue
		}
		allowed := map[string]bool{}
		if r.anyBut != nil {
			for _, above := range rows[:r.index] {
				for _, q := range above.pkgs {
					allowed[q] = !slices.Contains(r.anyBut, q)
				}
			}
		} else {
			for _, q := range r.imports {
				if qr, ok := rowOf[q]; !ok || qr.index > r.index {
					t.Errorf("%s's row lists %s, which has no row above it", p, q)
				}
				allowed[q] = true
			}
		}
		for _, q := range imports[p] {
			if !allowed[q] {
				t.Errorf("%s imports %s, which its row in docs/decisions.md does not list", p, q)
			}
		}
		want := r.in
		if want == "tests" {
			want = ""
		}
		if got := linkedBy[p]; !sameLetters(got, want) {
			t.Errorf("%s is linked by programs %q, its row says %q (S scheduler, W worker, B slurm-bridge, X hpcq-sandbox)", p, got, r.in)
		}
	}
	// A row's list is what its packages import, not more.
	for _, r := range rows {
		if r.anyBut != nil || r.planned() {
			continue
		}
		used := map[string]bool{}
		for _, p := range r.pkgs {
			if _, ok := imports[p]; !ok {
				t.Errorf("the layout table names %s, which is not a package", p)
			}
			for _, q := range imports[p] {
				used[q] = true
			}
		}
		for _, q := range r.imports {
			if !used[q] && !slices.Contains(r.pkgs, q) {
				t.Errorf("the row of %v lists %s, which none of them imports", r.pkgs, q)
			}
		}
	}
}

// TestProgramsKeepToTheirSide: what each side must not link, from the full
// dependency lists (third-party packages included).
func TestProgramsKeepToTheirSide(t *testing.T) {
	t.Parallel()
	deps := func(pkg string) []string { return goList(t, "{{.ImportPath}}", "-deps", "../"+pkg) }
	forbid := func(pkg string, why string, bad ...string) {
		for _, d := range deps(pkg) {
			for _, b := range bad {
				if d == b || strings.HasPrefix(d, b+"/") {
					t.Errorf("%s links %s: %s", pkg, d, why)
				}
			}
		}
	}
	forbid("pkg/schema", "the messages speak no transport",
		"github.com/nats-io", "github.com/redis", "github.com/ClickHouse", "net/http", "database/sql")
	for _, p := range []string{"internal/engine", "internal/prompt", "internal/search", "pkg/llm"} {
		forbid(p, "the scheduler's side runs no generated program", module+"internal/executor", module+"internal/nsinit")
	}
	forbid("pkg/llm", "a client needs no server", "github.com/nats-io/nats-server")
	forbid("cmd/worker", "a worker connects to a server and grows no tree",
		"github.com/nats-io/nats-server", module+"internal/engine", module+"internal/search", module+"internal/web")
	forbid("cmd/slurm-bridge", "the bridge starts workers, it runs no task",
		module+"internal/executor", module+"internal/nsinit", module+"internal/engine")
	forbid("pkg/rundir", "importing hpcq's public packages brings no linter", "github.com/golangci")
	for _, p := range []string{"internal/web", "internal/runview"} {
		forbid(p, "reading a run directory grows no tree and writes no paper",
			module+"internal/engine", module+"internal/dispatch", module+"internal/search", module+"internal/writeup", module+"internal/prompt")
	}
	if got := hpcqOnly(deps("cmd/hpcq-sandbox")); !slices.Equal(got, []string{"internal/nsinit", "cmd/hpcq-sandbox"}) {
		t.Errorf("cmd/hpcq-sandbox links %v: only internal/nsinit, the code that runs inside the sandbox", got)
	}
}

// TestLinterOutOfTheModule: the linter and its requirements stay in
// tools/go.mod, out of the graph of every program that imports hpcq's pkg/.
func TestLinterOutOfTheModule(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mod), "golangci") {
		t.Error("go.mod requires golangci-lint: it belongs in tools/go.mod (go tool -modfile=tools/go.mod golangci-lint)")
	}
	tools, err := os.ReadFile("../tools/go.mod")
	if err != nil || !strings.Contains(string(tools), "\ntool github.com/golangci/golangci-lint/v2/cmd/golangci-lint") {
		t.Errorf("tools/go.mod does not declare golangci-lint as its tool (err %v)", err)
	}
}

// sameLetters: a and b hold the same letters, in any order.
func sameLetters(a, b string) bool {
	x, y := []byte(a), []byte(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// TestCodeShape: the sizes a reader can hold: no Go file (tests aside) over
// 600 lines, no file of a main package over 200, and no function over 80
// lines without a "Long:" paragraph in its comment saying why.
func TestCodeShape(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(path, "../")
		lines := fset.File(f.Pos()).LineCount()
		switch {
		case lines > 600:
			t.Errorf("%s has %d lines (at most 600: split it by concern)", rel, lines)
		case strings.HasPrefix(rel, "cmd/") && lines > 200:
			t.Errorf("%s has %d lines (a main's files at most 200: its work belongs in a package)", rel, lines)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > 80 && (fd.Doc == nil || !strings.Contains(fd.Doc.Text(), "Long:")) {
				t.Errorf("%s:%d: %s has %d lines (over 80: split it, or say why not in a \"Long:\" paragraph of its comment)",
					rel, fset.Position(fd.Pos()).Line, fd.Name.Name, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
