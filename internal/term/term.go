// Package term shares a terminal between log records and one status line:
// the line is redrawn in place at the bottom, cut to the terminal's width,
// and a log record first clears it, is written on lines of its own, and the
// line is drawn again under it. Nothing is interleaved on one row.
package term

import (
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Screen is a terminal with a status line.
type Screen struct {
	mu    sync.Mutex
	out   *os.File // the terminal the status line is drawn on
	line  string   // the status line as last set ("" : none shown)
	shown bool
	width func() int
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// New returns a Screen drawing on out, a terminal.
func New(out *os.File) *Screen {
	return &Screen{out: out, width: func() int {
		ws, err := unix.IoctlGetWinsize(int(out.Fd()), unix.TIOCGWINSZ)
		if err != nil || ws.Col == 0 {
			return 80
		}
		return int(ws.Col)
	}}
}

// Status sets the status line and draws it.
func (s *Screen) Status(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = line
	s.draw()
}

// Done draws the line a last time and ends it: what follows starts on the
// next row, and the line is no longer redrawn.
func (s *Screen) Done(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = line
	s.draw()
	_, _ = io.WriteString(s.out, "\n")
	s.line, s.shown = "", false
}

// draw writes the line over the current row; s.mu held.
func (s *Screen) draw() {
	if s.line == "" {
		return
	}
	_, _ = io.WriteString(s.out, "\r\033[K"+Fit(Visible(s.line), s.width()-1))
	s.shown = true
}

// Writer returns w (the log's stream, on the same terminal) wrapped so that
// every write first clears the status line and draws it again after.
func (s *Screen) Writer(w io.Writer) io.Writer { return &logWriter{s: s, w: w} }

type logWriter struct {
	s *Screen
	w io.Writer
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.shown {
		_, _ = io.WriteString(l.s.out, "\r\033[K")
	}
	n, err := l.w.Write(p)
	l.s.draw()
	return n, err
}

// Fit cuts line to at most width columns (runes), ending it with "…" when
// it was longer.
func Fit(line string, width int) string {
	if width < 1 {
		width = 1
	}
	if utf8.RuneCountInString(line) <= width {
		return line
	}
	out := []rune(line)[:width-1]
	return string(out) + "…"
}
