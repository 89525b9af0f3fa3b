package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/memorytest"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

func TestConformance(t *testing.T) {
	memorytest.Exercise(t, func(t *testing.T, clock *memorytest.Clock) memory.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "memory.sqlite"), sqlite.Options{Now: clock.Now})
		require.NoError(t, err)
		return s
	})
}
