// A paper read as TeX reads it before setting type: its \input and
// \include files inlined, its own macros expanded where they are used
// (\newcommand and its kin with parameters and an optional first
// argument, \def with #1..#9, \let, \NewDocumentCommand with m and O{}
// arguments), siunitx's quantities written out (\SI{3.2}{\giga\flops}
// reads "3.2\,GFLOP/s"), and every byte of the result traced to the
// source byte it came from, so that a claim is reported where the paper
// wrote it.

package writeup

import (
	"io/fs"
	"path"
	"regexp"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// typeset is text with, for each byte, the offset in the paper's source it
// comes from (itself, or the outermost macro use or \input that printed
// it) and whether it is a copy of that source byte.
type typeset struct {
	text string
	from []int
	lit  []bool
}

// source is a paper's own text, each byte from itself.
func source(tex string) typeset {
	t := typeset{text: tex, from: make([]int, len(tex)), lit: make([]bool, len(tex))}
	for i := range t.from {
		t.from[i], t.lit[i] = i, true
	}
	return t
}

func (t typeset) slice(i, j int) typeset {
	return typeset{text: t.text[i:j], from: t.from[i:j], lit: t.lit[i:j]}
}

// builder appends to a typeset.
type builder struct {
	text []byte
	from []int
	lit  []bool
}

func (b *builder) copy(t typeset) {
	b.text = append(b.text, t.text...)
	b.from = append(b.from, t.from...)
	b.lit = append(b.lit, t.lit...)
}

// print appends s as printed by the use at source offset from.
func (b *builder) print(s string, from int) {
	b.text = append(b.text, s...)
	for range len(s) {
		b.from = append(b.from, from)
		b.lit = append(b.lit, false)
	}
}

func (b *builder) typeset() typeset {
	return typeset{text: string(b.text), from: b.from, lit: b.lit}
}

// A macro is one the paper defines: its parameters, the default of an
// optional first one (opt), and its body.
type macro struct {
	params int
	opt    *string
	body   string
}

// Bounds on what a paper may make the expander do: a macro that calls
// itself (\def\a{\a\a}) stops at maxDepth uses deep, and the text grows
// by at most a budget (4 x the source's, and 16 KiB).
const (
	maxDepth  = 32
	maxInputs = 8
)

type expander struct {
	inputs fs.FS
	macros map[string]*macro
	lets   map[string]string // \let\a\b of a command the paper does not define: \a reads as \b
	units  map[string]string // \DeclareSIUnit\flops{FLOP/s}
	budget int
}

// reserved are hpcq's own macros: never taken from a paper's definitions.
var reserved = map[string]bool{"fact": true, "factpct": true}

// expand reads tex as TeX would before setting type; inputs holds the
// files \input and \include name (nil: none are read). The facts file
// hpcq writes is not read (its definitions are \fact's).
func expand(tex string, inputs fs.FS) typeset {
	x := &expander{inputs: inputs, macros: map[string]*macro{}, lets: map[string]string{}, units: map[string]string{},
		budget: 4*len(tex) + 16<<10}
	return x.scan(source(tex), 0, 0)
}

// scan expands one text: a paper, a file it inputs, or a macro's body
// with its arguments in place (depth uses deep, within inputs files).
func (x *expander) scan(in typeset, depth, inputs int) typeset {
	var b builder
	t := in.text
	for i := 0; i < len(t); {
		switch t[i] {
		case '%':
			j := strings.IndexByte(t[i:], '\n')
			if j < 0 {
				j = len(t) - i
			}
			b.copy(in.slice(i, i+j))
			i += j
			continue
		case '\\':
			if j := x.command(&b, in, i, depth, inputs); j > i {
				i = j
				continue
			}
		}
		b.copy(in.slice(i, i+1))
		i++
	}
	return b.typeset()
}

// command handles the control sequence at i: copies what is not the
// paper's own (a control symbol, a verbatim environment, \verb), records a
// definition, expands a use. It returns where the text goes on.
func (x *expander) command(b *builder, in typeset, i, depth, inputs int) int {
	t := in.text
	j := i + 1
	for j < len(t) && (isLetter(t[j]) || t[j] == '@') {
		j++
	}
	name := t[i+1 : j]
	switch {
	case j == i+1: // \%, \\, \{ ...: two bytes as they are
		e := min(len(t), i+2)
		b.copy(in.slice(i, e))
		return e
	case name == "begin":
		if loc := verbatimEnvRe.FindStringIndex(t[i:]); loc != nil && loc[0] == 0 {
			b.copy(in.slice(i, i+loc[1]))
			return i + loc[1]
		}
	case name == "verb" || name == "lstinline":
		e := max(j, verbEnd(t, j))
		b.copy(in.slice(i, e))
		return e
	}
	if e, ok := x.define(t, name, j); ok {
		return e
	}
	if name == "input" || name == "include" {
		return x.input(b, in, i, j, depth, inputs)
	}
	if e, ok := x.siunitx(b, in, name, i, j, depth, inputs); ok {
		return e
	}
	if to, ok := x.lets[name]; ok {
		b.print(to, in.from[i])
		return j
	}
	m := x.macros[name]
	if m == nil || depth >= maxDepth || x.budget <= 0 {
		b.copy(in.slice(i, j))
		return j
	}
	args, e, ok := arguments(in, j, m, in.from[i])
	if !ok {
		b.copy(in.slice(i, j))
		return j
	}
	sub := substitute(m.body, args, in.from[i])
	x.budget -= len(sub.text) // charged before it is read: a body that doubles itself runs the budget out
	b.copy(x.scan(sub, depth+1, inputs))
	return e
}

// input inlines the file \input{name} names (name.tex when it has no
// extension) from x.inputs; a file that is not there, or is hpcq's facts
// file, stays as the command.
func (x *expander) input(b *builder, in typeset, i, j, depth, inputs int) int {
	t := in.text
	k := skipSpace(t, j)
	if k >= len(t) || t[k] != '{' {
		b.copy(in.slice(i, j))
		return j
	}
	e := matching(t, k)
	name := strings.TrimSpace(strings.TrimSuffix(t[k+1:e], "}"))
	if path.Ext(name) == "" {
		name += ".tex"
	}
	if x.inputs == nil || inputs >= maxInputs || name == rundir.FactsTeX || !fs.ValidPath(name) || x.budget <= 0 {
		b.copy(in.slice(i, e))
		return e
	}
	body, err := fs.ReadFile(x.inputs, name)
	if err != nil || len(body) > x.budget {
		b.copy(in.slice(i, e))
		return e
	}
	var f builder
	f.print(string(body), in.from[i])
	x.budget -= len(body)
	b.copy(x.scan(f.typeset(), depth, inputs+1))
	return e
}

func skipSpace(t string, k int) int {
	for k < len(t) && (t[k] == ' ' || t[k] == '\t' || t[k] == '\n') {
		k++
	}
	return k
}

// arguments reads m's arguments after a use (at from in the source)
// ending at j: the optional one
// in [..] (its default when absent), then each a braced group (without its
// braces) or one token. ok is false when the text ends first.
func arguments(in typeset, j int, m *macro, from int) (args []typeset, end int, ok bool) {
	t := in.text
	n := m.params
	if m.opt != nil {
		k := skipSpace(t, j)
		if k < len(t) && t[k] == '[' {
			e := matching(t, k)
			args = append(args, in.slice(k+1, max(k+1, e-1)))
			j = e
		} else {
			var d builder
			d.print(*m.opt, from)
			args = append(args, d.typeset())
		}
		n--
	}
	for ; n > 0; n-- {
		k := skipSpace(t, j)
		switch {
		case k >= len(t):
			return nil, j, false
		case t[k] == '{':
			e := matching(t, k)
			args = append(args, in.slice(k+1, max(k+1, e-1)))
			j = e
		case t[k] == '\\':
			e := k + 1
			for e < len(t) && isLetter(t[e]) {
				e++
			}
			e = max(e, min(len(t), k+2))
			args = append(args, in.slice(k, e))
			j = e
		default:
			args = append(args, in.slice(k, k+1))
			j = k + 1
		}
	}
	return args, j, true
}

// substitute is body with #1..#9 replaced by args (## by #), printed by
// the use at from.
func substitute(body string, args []typeset, from int) typeset {
	var b builder
	for i := 0; i < len(body); i++ {
		if body[i] == '#' && i+1 < len(body) {
			c := body[i+1]
			if c == '#' {
				b.print("#", from)
				i++
				continue
			}
			if k := int(c - '1'); k >= 0 && k < len(args) {
				b.copy(args[k])
				i++
				continue
			}
		}
		b.print(body[i:i+1], from)
	}
	return b.typeset()
}

// newcommandRe is the head of \newcommand and its kin up to the body's
// brace: the name (braced or not), the number of parameters, the optional
// first argument's default.
var newcommandRe = regexp.MustCompile(`^\*?\s*(?:\{\s*\\([a-zA-Z@]+)\s*\}|\\([a-zA-Z@]+))\s*(?:\[\s*(\d)\s*\])?\s*(?:\[((?:[^\[\]{}]|\{[^{}]*\})*)\])?\s*\{`)

// defRe is the head of \def and its kin: the name and its parameter text.
var defRe = regexp.MustCompile(`^\s*\\([a-zA-Z@]+)([^{]*)\{`)

// letRe is \let\a\b, \let\a=\b.
var letRe = regexp.MustCompile(`^\s*\\([a-zA-Z@]+)\s*=?\s*(\\[a-zA-Z@]+|\\.)`)

// documentCommandRe is \NewDocumentCommand{\name}{spec}{ and its kin.
var documentCommandRe = regexp.MustCompile(`^\s*(?:\{\s*\\([a-zA-Z@]+)\s*\}|\\([a-zA-Z@]+))\s*\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}\s*\{`)

// define records the definition whose command name ends at j and returns
// the offset after it (ok false when name defines nothing or the
// definition does not parse: it is then read as text).
func (x *expander) define(t, name string, j int) (int, bool) {
	rest := t[j:]
	switch name {
	case "newcommand", "renewcommand", "providecommand", "DeclareRobustCommand":
		loc := newcommandRe.FindStringSubmatchIndex(rest)
		if loc == nil {
			return j, false
		}
		group := func(k int) string {
			if loc[2*k] < 0 {
				return ""
			}
			return rest[loc[2*k]:loc[2*k+1]]
		}
		mac, macName := &macro{}, group(1)+group(2)
		if p := group(3); p != "" {
			mac.params = int(p[0] - '0')
		}
		if loc[8] >= 0 && mac.params > 0 {
			d := group(4)
			mac.opt = &d
		}
		keep := name != "providecommand" || x.macros[macName] == nil
		return x.body(t, j+loc[1]-1, macName, mac, keep)
	case "def", "gdef", "edef", "xdef":
		loc := defRe.FindStringSubmatchIndex(rest)
		if loc == nil {
			return j, false
		}
		params := strings.ReplaceAll(rest[loc[4]:loc[5]], " ", "")
		mac := &macro{params: len(params) / 2}
		ok := params == "#1#2#3#4#5#6#7#8#9"[:len(params)] && len(params)%2 == 0
		return x.body(t, j+loc[1]-1, rest[loc[2]:loc[3]], mac, ok)
	case "let":
		m := letRe.FindStringSubmatch(rest)
		if m == nil {
			return j, false
		}
		if to := x.macros[m[2][1:]]; to != nil {
			x.macros[m[1]] = to
		} else if !reserved[m[1]] {
			delete(x.macros, m[1])
			x.lets[m[1]] = m[2]
		}
		return j + len(m[0]), true
	case "NewDocumentCommand", "RenewDocumentCommand", "ProvideDocumentCommand", "DeclareDocumentCommand":
		return x.documentCommand(t, j)
	case "DeclareSIUnit":
		if m := regexp.MustCompile(`^\s*(?:\[[^\]]*\])?\s*\\([a-zA-Z]+)\s*\{([^{}]*)\}`).FindStringSubmatch(rest); m != nil {
			x.units[m[1]] = m[2]
			return j + len(m[0]), true
		}
	case "newenvironment", "renewenvironment":
		return skipGroups(t, j), true // its numbers are code, read where it is used
	}
	return j, false
}

// body reads the braced body at open and, when keep, records it as name's.
func (x *expander) body(t string, open int, name string, m *macro, keep bool) (int, bool) {
	e := matching(t, open)
	m.body = t[open+1 : max(open+1, e-1)]
	if keep && !reserved[name] {
		x.macros[name] = m
		delete(x.lets, name)
	}
	return e, true
}

// documentCommand is \NewDocumentCommand with m and O{default} arguments
// (a first O only); another specification is read over, not recorded.
func (x *expander) documentCommand(t string, j int) (int, bool) {
	loc := documentCommandRe.FindStringSubmatchIndex(t[j:])
	if loc == nil {
		return j, false
	}
	name := t[j+loc[2] : j+loc[3]]
	if loc[4] >= 0 {
		name = t[j+loc[4] : j+loc[5]]
	}
	spec := strings.ReplaceAll(t[j+loc[6]:j+loc[7]], " ", "")
	m := &macro{}
	ok := true
	if strings.HasPrefix(spec, "O{") {
		e := matching(spec, 1)
		d := spec[2:max(2, e-1)]
		m.opt, m.params, spec = &d, 1, spec[e:]
	}
	for _, c := range spec {
		ok = ok && c == 'm'
		m.params++
	}
	return x.body(t, j+loc[1]-1, name, m, ok && m.params <= 9)
}

// skipGroups is the offset after the braced and bracketed groups at j.
func skipGroups(t string, j int) int {
	for k := skipSpace(t, j); k < len(t) && (t[k] == '{' || t[k] == '['); k = skipSpace(t, j) {
		j = matching(t, k)
	}
	return j
}

// locate is n, found in t at t's offsets, where the source tex has it: its
// own digits when t copies them from tex, else the use of the macro (or
// the \input) that printed it, its Text the command's name.
func (t typeset) locate(n rundir.Number, tex string) rundir.Number {
	s, e := n.Offset, min(len(t.from), n.Offset+len(n.Text))
	copied := true
	for k := s; k < e && copied; k++ {
		copied = t.lit[k] && t.from[k] == t.from[s]+k-s
	}
	if copied && e > s {
		n.Offset = t.from[s]
		return n
	}
	k := s
	for k < e-1 && t.lit[k] {
		k++
	}
	off := t.from[k]
	end := off + 1
	for end < len(tex) && (isLetter(tex[end]) || tex[end] == '@') {
		end++
	}
	n.Offset, n.Typeset, n.Text = off, n.Text, tex[off:min(len(tex), max(end, off+1))]
	return n
}
