package tree

import (
	"cmp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompareIDs(t *testing.T) {
	t.Parallel()
	ids := []string{"zz", "n10000", "a", "n0002", "n9999", "n0010", "n123456", "nx", "n0001", "n01a", "n10001"}
	slices.SortFunc(ids, CompareIDs)
	require.Equal(t, []string{"n0001", "n0002", "n0010", "n9999", "n10000", "n10001", "n123456", "a", "n01a", "nx", "zz"}, ids)
}

// FuzzCompareIDs: CompareIDs is a total order (antisymmetric, transitive,
// zero only for equal ids), numeric on "n" and digits.
func FuzzCompareIDs(f *testing.F) {
	f.Add("n0001", "n10000", "n1a")
	f.Add("n2", "n10", "n1a")
	f.Add("n007", "n7", "n0007")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		ab, ba := CompareIDs(a, b), CompareIDs(b, a)
		require.Equal(t, ab, -ba, "antisymmetric: %q %q", a, b)
		require.Equal(t, a == b, ab == 0, "zero only for equal ids: %q %q", a, b)
		if ab <= 0 && CompareIDs(b, c) <= 0 {
			require.LessOrEqual(t, CompareIDs(a, c), 0, "transitive: %q %q %q", a, b, c)
		}
		if digitsAfterN(a) && digitsAfterN(b) && len(a) < 20 && len(b) < 20 {
			x, _ := strconv.ParseUint(a[1:], 10, 64)
			y, _ := strconv.ParseUint(b[1:], 10, 64)
			if x != y {
				require.Equal(t, cmp.Compare(x, y), ab, "numeric: %q %q", a, b)
			}
		}
	})
}
