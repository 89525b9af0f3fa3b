// Seed 004's detail levels: a tree rendered at L0 to L2, a fact cut to a
// level's length.

package memory

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hpcq/hpcq/internal/textcut"
)

// Level is a detail level of a rendered item.
type Level int

// The seed's progressive detail levels.
const (
	L0 Level = iota // short hash and title
	L1              // plus the key predicates: kind or key, tags, repeats, the first words
	L2              // everything
)

const (
	titleWords = 3
	l1Words    = 12
)

func (l Level) String() string { return "L" + strconv.Itoa(int(l)) }

// RenderLevel writes the tree for reading at a level: one line per item.
func RenderLevel(t Tree, l Level) string {
	var b strings.Builder
	for _, br := range t.Branches {
		fmt.Fprintf(&b, "## %s", br.ID)
		if br.Parent != "" {
			fmt.Fprintf(&b, " (from %s)", br.Parent)
		}
		b.WriteString("\n")
		for _, c := range br.State.Core {
			b.WriteString(coreAt(c, l) + "\n")
		}
		for _, e := range br.State.Recall {
			b.WriteString(eventAt(e, l) + "\n")
		}
		for _, f := range br.State.Archival {
			b.WriteString(FactAt(f.Text, f.Tags, f.Count, l) + "\n")
		}
	}
	return b.String()
}

func coreAt(c StateCore, l Level) string {
	switch l {
	case L0:
		return c.Key
	case L1:
		return fmt.Sprintf("- %s (%d): %s", c.Key, c.Importance, words(c.Value, l1Words))
	}
	return fmt.Sprintf("- %s (importance %d): %s", c.Key, c.Importance, textcut.OneLine(c.Value, len(c.Value)+1))
}

func eventAt(e StateEvent, l Level) string {
	switch l {
	case L0:
		return e.Kind + ": " + title(e.Payload)
	case L1:
		return fmt.Sprintf("- %s%s: %s", e.Kind, optional(" phase=", e.Phase), words(e.Payload, l1Words))
	}
	return fmt.Sprintf("- %s%s%s: %s", e.Kind, optional(" node=", e.Node), optional(" phase=", e.Phase), textcut.OneLine(e.Payload, len(e.Payload)+1))
}

// FactAt is an archival fact as a line at level l: L0 its short hash (6
// hex digits) and title (the first three words), L1 a longer hash with its
// first twelve words, tags and repeats, L2 the whole text.
func FactAt(text string, tags []string, count int, l Level) string {
	return factAt(text, tags, count, l, len(text)+1)
}

func factAt(text string, tags []string, count int, l Level, maxChars int) string {
	switch l {
	case L0:
		return fmt.Sprintf("#%.6s %s", FactHash(text), title(text))
	case L1:
		s := fmt.Sprintf("- #%.8s %s", FactHash(text), words(text, l1Words))
		if len(tags) > 0 {
			s += " [" + strings.Join(tags, ", ") + "]"
		}
		if count > 1 {
			s += fmt.Sprintf(" (x%d)", count)
		}
		return s
	}
	s := "- " + textcut.OneLine(text, maxChars)
	if len(tags) > 0 {
		s += " [" + strings.Join(tags, ", ") + "]"
	}
	if count > 1 {
		s += fmt.Sprintf(" (seen %d times)", count)
	}
	return s
}

// title is the first words of s: an item's title at L0.
func title(s string) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(len(f), titleWords)], " ")
}

// words is the first n words of s, with "..." when there were more.
func words(s string, n int) string {
	f := strings.Fields(s)
	if len(f) <= n {
		return strings.Join(f, " ")
	}
	return strings.Join(f[:n], " ") + " ..."
}

func optional(prefix, v string) string {
	if v == "" {
		return ""
	}
	return prefix + v
}
