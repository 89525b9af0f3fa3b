package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestFloorCeil(t *testing.T) {
	t.Parallel()
	s := "aé€😀b" // runes of 1, 2, 3, 4 and 1 bytes: starts at 0 1 3 6 10, len 11
	for _, c := range []struct{ n, floor, ceil int }{
		{-3, 0, 0}, {0, 0, 0}, {1, 1, 1}, {2, 1, 3}, {3, 3, 3}, {4, 3, 6}, {5, 3, 6},
		{7, 6, 10}, {9, 6, 10}, {10, 10, 10}, {11, 11, 11}, {99, 11, 11},
	} {
		if got := Floor(s, c.n); got != c.floor {
			t.Errorf("Floor(%d) = %d, want %d", c.n, got, c.floor)
		}
		if got := Floor([]byte(s), c.n); got != c.floor {
			t.Errorf("Floor([]byte, %d) = %d, want %d", c.n, got, c.floor)
		}
		if got := Ceil(s, c.n); got != c.ceil {
			t.Errorf("Ceil(%d) = %d, want %d", c.n, got, c.ceil)
		}
	}
}

// FuzzFloorCeil: the cuts of valid text are valid text, within bounds, and
// the nearest such cuts.
func FuzzFloorCeil(f *testing.F) {
	f.Add("aé€😀b", 4)
	f.Add("", 0)
	f.Add("\xff\xfe", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		fl, ce := Floor(s, n), Ceil(s, n)
		if fl < 0 || fl > len(s) || ce < 0 || ce > len(s) {
			t.Fatalf("out of range: floor %d ceil %d len %d", fl, ce, len(s))
		}
		if c := max(0, min(n, len(s))); fl > c || ce < c {
			t.Fatalf("n=%d: floor %d, ceil %d", n, fl, ce)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(s[:fl]) || !utf8.ValidString(s[ce:])) {
			t.Fatalf("valid %q cut into invalid pieces at %d/%d", s, fl, ce)
		}
		for k := fl + 1; k <= min(n, len(s)); k++ {
			if k == len(s) || utf8.RuneStart(s[k]) {
				t.Fatalf("n=%d: %d is a later cut than floor %d", n, k, fl)
			}
		}
	})
}
