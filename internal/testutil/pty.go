package testutil

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Pty opens a pseudo-terminal of cols x rows: the master to read what a
// program wrote, the slave to give it as its stdout and stderr.
func Pty(t testing.TB, cols, rows int) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open pty slave: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}); err != nil {
		t.Fatalf("pty size: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// Screen replays what a program wrote to a terminal of cols columns:
// carriage returns, line feeds, "erase to end of line" and the wrap at the
// last column, as a terminal shows them. It returns every row, scrolled off
// or not.
func Screen(out []byte, cols int) []string {
	var rows []string
	row := []rune{}
	col := 0
	commit := func() {
		rows = append(rows, string(row))
		row, col = []rune{}, 0
	}
	rs := []rune(string(out))
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			commit()
		case r == 0x1b && i+2 < len(rs) && rs[i+1] == '[':
			j := i + 2
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9' || rs[j] == ';') {
				j++
			}
			if j < len(rs) && rs[j] == 'K' && col < len(row) {
				row = row[:col]
			}
			i = j
		default:
			if col == cols {
				commit() // the terminal wraps
			}
			if col < len(row) {
				row[col] = r
			} else {
				row = append(row, r)
			}
			col++
		}
	}
	if len(row) > 0 {
		rows = append(rows, string(row))
	}
	return rows
}
