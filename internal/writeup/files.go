// The paper's files in the run directory: every one written here, once.

package writeup

import (
	"os"
	"path/filepath"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// WriteFacts writes the run's facts (facts.json) and the macros that state
// them (facts.tex) into its paper directory, made if needed.
func WriteFacts(run rundir.Dir, facts []rundir.Fact) error {
	if err := os.MkdirAll(run.Path(rundir.PaperDir), 0o755); err != nil {
		return err
	}
	if err := rundir.WriteJSON(run.Path(rundir.PaperFile(rundir.FactsFile)), facts); err != nil {
		return err
	}
	return fileio.WriteFileAtomic(run.Path(rundir.PaperFile(rundir.FactsTeX)), []byte(Macros(facts)))
}

// WriteClaims writes claims.json: what the dashboard, the report and a
// reader are told of the paper.
func WriteClaims(run rundir.Dir, c rundir.Claims) error {
	return rundir.WriteJSON(run.Path(rundir.PaperFile(rundir.ClaimsFile)), c)
}

// WritePaper writes what the model's rounds made: paper.tex, each round's
// draft (drafts/round-N.tex), the figures the drafts were given, and
// claims.json (the PDF and its pages are there already, from the compile).
func WritePaper(run rundir.Dir, p Paper) error {
	for _, d := range []string{rundir.DraftsDir, rundir.FiguresDir} {
		dir := run.Path(rundir.PaperFile(d))
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	files := map[string][]byte{rundir.PaperTeX: []byte(p.TeX)}
	for _, r := range p.Rounds {
		files[rundir.DraftFile(r.Round)] = []byte(r.TeX)
	}
	for _, f := range p.Figures {
		files[f.Path] = f.Data
	}
	for name, data := range files {
		if err := fileio.WriteFileAtomic(run.Path(rundir.PaperFile(name)), data); err != nil {
			return err
		}
	}
	return WriteClaims(run, p.Claims())
}

// BuildDir is where the paper is compiled, emptied first.
func BuildDir(run rundir.Dir) (string, error) {
	build := filepath.Join(run.Path(rundir.PaperDir), rundir.BuildDir)
	if err := os.RemoveAll(build); err != nil {
		return "", err
	}
	return build, nil
}
