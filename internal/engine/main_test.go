package engine

import (
	"context"
	"testing"

	"github.com/hpcq/hpcq/internal/leakcheck"
	"github.com/hpcq/hpcq/internal/run"
	"github.com/hpcq/hpcq/internal/session"
	"github.com/hpcq/hpcq/internal/testutil"
)

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { leakcheck.Main(m) }

// bareEngine is an engine of the run in dir with a session that has no
// model or memory: for the tests of its parts.
func bareEngine(t *testing.T, dir string, spec run.Spec) *engine {
	e := &engine{s: &session.Session{Spec: spec, Dir: dir, Log: testutil.Logger(t)}}
	e.files = &nodeFiles{dir: dir, oldPlans: hasOldPlans(dir), unwritten: e.isUnwritten}
	return e
}

// runEngine runs the search of a session opened for it, as `scheduler
// run` does.
func runEngine(t *testing.T, ctx context.Context, sp session.Params, p Params) (Summary, error) {
	t.Helper()
	s, err := session.Open(sp)
	if err != nil {
		return Summary{}, err
	}
	defer s.Close()
	return Run(ctx, s, p)
}
