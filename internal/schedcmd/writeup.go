package schedcmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/executor"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/runview"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/stores"
	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/worker"
	"github.com/hpcq/hpcq/internal/writeup"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

// WriteupOptions are what `scheduler writeup` is asked.
type WriteupOptions struct {
	RunDir string
	// Facts writes the facts and their macros only.
	Facts bool
	// Check is a LaTeX file whose numbers and facts are checked (no model).
	Check string
	// PDF compiles the checked paper (with facts.tex and the idea's
	// refs.bib) in a task's sandbox into DIR/paper/paper.pdf and its pages.
	PDF bool
	Log *slog.Logger
}

// Writeup writes a run's paper: its facts from the results tables (the
// SQLite file of its directory, or ClickHouse) into DIR/paper/facts.json
// and the macros that state them into facts.tex; then the model's paper
// around them (paper.tex, paper.pdf, claims.json, the figures), ending
// with the writeup line. With Facts it stops after the facts; with Check
// it checks that paper (no model): its numbers and \fact ids against the
// facts, its citations against the idea's refs.bib, and prints one line.
// A paper with an unverified number, an unknown fact id or citation, or
// none that compiled, exits 1.
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
	spec, err := runview.ReadSpec(o.RunDir)
	if err != nil {
		return err
	}
	facts, dir, err := runFacts(ctx, cfg, spec, info, o.RunDir)
	if err != nil {
		return err
	}
	switch {
	case o.Facts:
		run := rundir.Dir(o.RunDir)
		fmt.Printf("writeup facts=%d facts_json=%s facts_tex=%s\n", len(facts), run.Path(rundir.PaperFile(rundir.FactsFile)), run.Path(rundir.PaperFile(rundir.FactsTeX)))
		return nil
	case o.Check != "":
		return checkPaper(ctx, cfg, o, spec, info, dir, facts)
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	client, closeLLM, _, err := runLLM(&spec, info.IdeaDir, o.RunDir, log)
	if err != nil {
		return err
	}
	defer logClose(log, "llm: the cassette or cache", closeLLM)
	sink, _, err := stores.OpenResults(ctx, cfg.Store, rundir.Dir(o.RunDir), log)
	if err != nil {
		return err
	}
	defer logClose(log, "results", sink.Close)
	s, err := session.Open(session.Params{Spec: spec, RunDir: o.RunDir, LLM: client, Results: sink, Logger: log})
	if err != nil {
		return err
	}
	defer s.Close()
	ok, err := writePaper(ctx, cfg, paperRun{info: info, facts: facts, s: s})
	if err != nil {
		return err
	}
	if !ok {
		return exitError(1)
	}
	return nil
}

// runFacts gathers the run's facts and writes DIR/paper/facts.json and
// facts.tex; it returns them and the paper's directory.
func runFacts(ctx context.Context, cfg *config.Scheduler, spec run.Spec, info rundir.Info, runDir string) ([]rundir.Fact, string, error) {
	dialect := results.DialectSQLite
	if info.Results["store"] == "clickhouse" {
		dialect = results.DialectClickHouse
	}
	q := func(ctx context.Context, sql string) (*results.Table, error) {
		return queryRun(ctx, cfg, runDir, sql)
	}
	facts, err := writeup.Facts(ctx, q, writeup.Run{ID: info.RunID, Metric: spec.Metric.Name, Unit: spec.Metric.Unit,
		Maximize: spec.Metric.Direction != "minimize", Dialect: dialect, Evaluated: spec.Evaluation.Harness != nil})
	if err != nil {
		return nil, "", err
	}
	if err := writeup.WriteFacts(rundir.Dir(runDir), facts); err != nil {
		return nil, "", err
	}
	return facts, rundir.Dir(runDir).Path(rundir.PaperDir), nil
}

// checkPaper checks o.Check against the facts and the idea's refs.bib,
// compiles it with o.PDF, writes claims.json and prints the line.
func checkPaper(ctx context.Context, cfg *config.Scheduler, o WriteupOptions, spec run.Spec, info rundir.Info, dir string, facts []rundir.Fact) error {
	tex, err := os.ReadFile(o.Check)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(filepath.Dir(o.Check)) // \input files: from the paper's directory, never outside it
	if err != nil {
		return err
	}
	defer root.Close()
	r := writeup.CheckPaper(string(tex), root.FS(), facts, writeup.GivenIn(writeup.Setup(o.RunDir), spec.Idea))
	bib := runBib(spec, info)
	cited, unknownCites := writeup.Citations(string(tex), bib)
	claims := rundir.Dir(o.RunDir).Path(rundir.PaperFile(rundir.ClaimsFile))
	printUnverified(r)
	for _, id := range r.UnknownFacts {
		fmt.Fprintf(term.Stderr(), "unknown fact: \\fact{%s}\n", id)
	}
	for _, k := range unknownCites {
		fmt.Fprintf(term.Stderr(), "unknown citation: %s (not in the idea's %s)\n", k, rundir.RefsBib)
	}
	// claims.json says what the dashboard and report show of the paper: its
	// PDF only when this check compiled it.
	cl := rundir.Claims{Report: r, Citations: cited}
	pdf := ""
	if o.PDF {
		files := []schema.File{{Path: rundir.PaperTeX, Content: string(tex)}, {Path: rundir.FactsTeX, Content: writeup.Macros(facts)}}
		if len(bib) > 0 {
			files = append(files, schema.File{Path: rundir.RefsBib, Content: bib})
		}
		figs, err := writeup.FigureFiles(dir)
		if err != nil {
			return err
		}
		files = append(files, figs...)
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
		cl.PDF, cl.Pages = filepath.Base(c.PDF), len(c.Pages)
	}
	if err := writeup.WriteClaims(rundir.Dir(o.RunDir), cl); err != nil {
		return err
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
	build, err := writeup.BuildDir(rundir.Dir(filepath.Dir(dir)))
	if err != nil {
		return writeup.Compiler{}, err
	}
	e, err := executor.NewExecutor(executor.ConfigFrom(cfg.Tasks, build))
	if err != nil {
		return writeup.Compiler{}, err
	}
	return writeup.Compiler{RunID: runID, Dir: dir, Run: func(ctx context.Context, task *schema.NodeTask) (*schema.NodeResult, string, error) {
		res, err := e.Execute(ctx, task, worker.Slot{Cores: 1})
		return res, e.WorkspaceDir(task), err
	}}, nil
}
