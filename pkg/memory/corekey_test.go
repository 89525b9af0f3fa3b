package memory_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
)

// TestCoreSetRefusesControlKeys: a key with NUL, a newline, a
// bidirectional override or invalid UTF-8 is refused by every writer, not
// only by the reply protocol, and nothing is stored.
func TestCoreSetRefusesControlKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "m.sqlite"), sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	m := memory.New(s, memory.Config{}, memory.Options{})
	_, err = m.Fork(ctx, "n1", "")
	require.NoError(t, err)
	for _, k := range []string{"a\x00b", "a\nb", "safe\u202eexe", "a\xffb", "\u200bzero"} {
		_, err := m.CoreSet(ctx, memory.CoreSetParams{Branch: "n1", Key: k, Value: "v"})
		require.ErrorIs(t, err, memory.ErrInvalid, "%q", k)
	}
	core, err := s.CoreList(ctx, memory.CoreListParams{Branch: "n1"})
	require.NoError(t, err)
	require.Empty(t, core)
	_, err = m.CoreSet(ctx, memory.CoreSetParams{Branch: "n1", Key: "tile size", Value: "32"})
	require.NoError(t, err)
}
