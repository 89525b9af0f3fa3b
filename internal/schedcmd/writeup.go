package schedcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/writeup"
	"github.com/hpcq/hpcq/pkg/results"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// WriteupOptions are what `scheduler writeup` is asked.
type WriteupOptions struct {
	RunDir string
	// Check is a LaTeX file whose numbers and facts are checked.
	Check string
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
	tex, err := os.ReadFile(o.Check)
	if err != nil {
		return err
	}
	r := writeup.CheckPaper(string(tex), facts)
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
	fmt.Printf("writeup check numbers=%d verified=%d unverified=%d facts_cited=%d unknown_facts=%d claims=%s\n",
		r.Numbers, r.Verified, r.Unverified, len(r.FactsCited), len(r.UnknownFacts), claims)
	if r.Unverified > 0 || len(r.UnknownFacts) > 0 {
		return exitError(1)
	}
	return nil
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(path, append(data, '\n'))
}
