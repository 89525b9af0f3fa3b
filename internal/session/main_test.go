package session

import (
	"testing"

	"github.com/hpcq/hpcq/internal/leakcheck"
)

// TestMain fails the package's tests if they leave goroutines running.
func TestMain(m *testing.M) { leakcheck.Main(m) }
