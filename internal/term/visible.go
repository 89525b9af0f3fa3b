package term

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// A program's output and a model's reply are written by someone else: on
// a terminal their escape sequences would act (OSC 52 writes the user's
// clipboard, OSC 0 retitles the window, CSI 2J clears the screen, a bare
// CR overwrites what was printed, a bidirectional override reorders what
// is read). What hpcq prints of them to a terminal has every control made
// visible instead, as `cat -v` does: ESC as ^[, CR as ^M, DEL as ^?; a C1
// control, a byte that is not UTF-8 and a bidirectional control as
// <U+009B>, <\xff>, <U+202E>. Newlines and tabs stay. Where the output is
// not a terminal (a file, a pipe), or the user asks (--raw), bytes are
// written as they are.

// Visible is s with every control made visible (see above).
func Visible(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		writeVisible(&b, r, n, s[i])
		i += n
	}
	return b.String()
}

// plain reports whether s has nothing Visible changes (the common case:
// no allocation).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return false
		}
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// writeVisible writes rune r (n bytes; first its first byte) as Visible
// shows it.
func writeVisible(b *strings.Builder, r rune, n int, first byte) {
	switch {
	case r == utf8.RuneError && n == 1:
		fmt.Fprintf(b, `<\x%02x>`, first)
	case r == '\n' || r == '\t':
		b.WriteRune(r)
	case r < 0x20:
		b.WriteByte('^')
		b.WriteByte(byte(r) + '@')
	case r == 0x7f:
		b.WriteString("^?")
	case r >= 0x80 && r <= 0x9f, bidi(r):
		fmt.Fprintf(b, "<U+%04X>", r)
	default:
		b.WriteRune(r)
	}
}

// bidi reports whether r is a Unicode bidirectional control (embeddings,
// overrides, isolates, marks): what makes text read otherwise than it is.
func bidi(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// VisibleWriter writes to w what it is given with every control made
// visible. A UTF-8 character cut between two writes is held until the
// next; Close writes what is held (as bytes that are not UTF-8) but does
// not close w.
func VisibleWriter(w io.Writer) io.WriteCloser { return &visibleWriter{w: w} }

type visibleWriter struct {
	mu    sync.Mutex
	w     io.Writer
	carry []byte // the start of a character cut at the end of the last write
}

func (v *visibleWriter) Write(p []byte) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	data := p
	if len(v.carry) > 0 {
		data = append(v.carry, p...)
		v.carry = nil
	}
	// Hold a character's first bytes when it may go on in the next write.
	end := len(data)
	for k := 1; k <= utf8.UTFMax-1 && k <= len(data); k++ {
		c := data[len(data)-k]
		if c < 0x80 {
			break
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(data[len(data)-k:]) {
				end = len(data) - k
			}
			break
		}
	}
	v.carry = append(v.carry, data[end:]...)
	s := string(data[:end])
	if _, err := io.WriteString(v.w, Visible(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (v *visibleWriter) Close() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.carry) == 0 {
		return nil
	}
	s := Visible(string(v.carry))
	v.carry = nil
	_, err := io.WriteString(v.w, s)
	return err
}

// Raw, when set (a command's --raw), makes Out give the file itself even
// on a terminal.
var Raw = false

// Out is f for what hpcq prints of a program's output or a model's text:
// f itself when it is not a terminal or Raw is set, else a VisibleWriter
// of it.
func Out(f *os.File) io.Writer {
	if Raw || !IsTerminal(f) {
		return f
	}
	return VisibleWriter(f)
}

// Stdout and Stderr are Out of the process's standard output and error.
func Stdout() io.Writer { return Out(os.Stdout) }
func Stderr() io.Writer { return Out(os.Stderr) }
