package schedcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/writeup"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// WriteupOptions are what `scheduler writeup` is asked.
type WriteupOptions struct {
	RunDir string
	// Check is a LaTeX file whose numbers and facts are checked.
	Check string
	// PDF compiles the checked paper (with facts.tex and the idea's
	// refs.bib) in a task's sandbox into DIR/paper/paper.pdf and its pages.
	PDF bool
}

// PaperDir is where a run's paper and its evidence go.
const PaperDir = "paper"

// Writeup gathers a run's facts from its results tables (the SQLite file
// of its directory, or ClickHouse) into DIR/paper/facts.json, and the
// macros that state them into DIR/paper/facts.tex; with Check, it checks
// that paper's numeric literals and \fact ids against them, writes
// DIR/paper/claims.json and prints one line. A paper with an unverified
// number or an unknown fact id exits 1.
func Writeup(ctx context.Context, cfg *config.Scheduler, o WriteupOptions) error {
	if o.RunDir == "" {
		var err error
		if o.RunDir, err = newestRun(cfg.RunsDir); err != nil {
			return err
		}
	}
	info, err := rundir.Dir(o.RunDir).ReadInfo()
	if err != nil {
		return fmt.Errorf("%s: %w", o.RunDir, err)
	}
	spec, err := engine.ReadSpec(o.RunDir)
	if err != nil {
		return err
	}
	dialect := results.DialectSQLite
	if info.Results["store"] == "clickhouse" {
		dialect = results.DialectClickHouse
	}
	q := func(ctx context.Context, sql string) (*results.Table, error) {
		return queryRun(ctx, cfg, o.RunDir, sql)
	}
	facts, err := writeup.Facts(ctx, q, writeup.Run{ID: info.RunID, Metric: spec.Metric.Name, Unit: spec.Metric.Unit,
		Maximize: spec.Metric.Direction != "minimize", Dialect: dialect})
	if err != nil {
		return err
	}
	dir := filepath.Join(o.RunDir, PaperDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSONFile(filepath.Join(dir, "facts.json"), facts); err != nil {
		return err
	}
	if err := fileio.WriteFileAtomic(filepath.Join(dir, "facts.tex"), []byte(writeup.Macros(facts))); err != nil {
		return err
	}
	if o.Check == "" {
		fmt.Printf("writeup facts=%d facts_json=%s facts_tex=%s\n", len(facts), filepath.Join(dir, "facts.json"), filepath.Join(dir, "facts.tex"))
		return nil
	}
	return checkPaper(ctx, cfg, o, info, dir, facts)
}

// checkPaper checks o.Check against the facts and the idea's refs.bib,
// compiles it with o.PDF, writes claims.json and prints the line.
func checkPaper(ctx context.Context, cfg *config.Scheduler, o WriteupOptions, info rundir.Info, dir string, facts []writeup.Fact) error {
	tex, err := os.ReadFile(o.Check)
	if err != nil {
		return err
	}
	r := writeup.CheckPaper(string(tex), facts)
	var bib []byte
	if info.IdeaDir != "" {
		bib, _ = os.ReadFile(filepath.Join(info.IdeaDir, "refs.bib"))
	}
	cited, unknownCites := writeup.Citations(string(tex), string(bib))
	claims := filepath.Join(dir, "claims.json")
	if err := writeJSONFile(claims, r); err != nil {
		return err
	}
	for _, c := range r.Claims {
		if !c.Verified() {
			fmt.Fprintf(os.Stderr, "unverified: %s (in %q)\n", c.Text, c.Context)
		}
	}
	for _, id := range r.UnknownFacts {
		fmt.Fprintf(os.Stderr, "unknown fact: \\fact{%s}\n", id)
	}
	for _, k := range unknownCites {
		fmt.Fprintf(os.Stderr, "unknown citation: %s (not in the idea's refs.bib)\n", k)
	}
	pdf := ""
	if o.PDF {
		files := []schema.File{{Path: "paper.tex", Content: string(tex)}, {Path: "facts.tex", Content: writeup.Macros(facts)}}
		if len(bib) > 0 {
			files = append(files, schema.File{Path: "refs.bib", Content: string(bib)})
		}
		comp, err := compiler(cfg, info.RunID, dir)
		if err != nil {
			return err
		}
		c, err := comp.Compile(ctx, 1, files)
		if err != nil {
			return err
		}
		if c.Error != "" {
			return fmt.Errorf("writeup: the paper did not compile: %s", c.Error)
		}
		pdf = fmt.Sprintf(" pdf=%s pages=%d", c.PDF, len(c.Pages))
	}
	fmt.Printf("writeup check%s numbers=%d verified=%d unverified=%d facts_cited=%d unknown_facts=%d citations=%d unknown_citations=%d claims=%s\n",
		pdf, r.Numbers, r.Verified, r.Unverified, len(r.FactsCited), len(r.UnknownFacts), len(cited), len(unknownCites), claims)
	if r.Unverified > 0 || len(r.UnknownFacts) > 0 || len(unknownCites) > 0 {
		return exitError(1)
	}
	return nil
}

// compiler compiles a run's paper in the sandbox of this machine's tasks,
// in dir/.build (emptied first).
func compiler(cfg *config.Scheduler, runID, dir string) (writeup.Compiler, error) {
	build := filepath.Join(dir, ".build")
	if err := os.RemoveAll(build); err != nil {
		return writeup.Compiler{}, err
	}
	e, err := executor.NewExecutor(executor.ConfigFrom(cfg.Tasks, build))
	if err != nil {
		return writeup.Compiler{}, err
	}
	return writeup.Compiler{Exec: e, RunID: runID, Dir: dir}, nil
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(path, append(data, '\n'))
}
