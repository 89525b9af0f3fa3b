package results

import (
	"fmt"
	"regexp"
	"strings"
)

// RunTables are the ClickHouse tables with one run's rows among many
// runs' (every table has a run column and is a ReplacingMergeTree): the
// results tables and the memory's.
var RunTables = append(append([]string(nil), Tables...), "archival", "archival_terms", "archival_hits", "recall_events")

// runIDRe is a run id ScopeToRun puts in a query: what rundir accepts.
var runIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ScopeToRun rewrites a ClickHouse read statement so that each of hpcq's
// tables it reads (RunTables, bare or qualified by a database) is one run's
// rows as they stand: `FROM nodes` reads `(SELECT * FROM nodes FINAL WHERE
// run = 'ID') AS nodes`, a JOIN's table and a FROM list's the same, an
// alias the query gives kept, a FINAL it wrote dropped (the scope has it).
// A name in a string, a comment or a column reference (nodes.node) is not
// a table read and is left alone. A site's ClickHouse holds many runs and
// users: a query of the run's own, unscoped, would answer for all of them
// (an earlier run's n0001 beside this one's), and without FINAL for rows
// not yet merged twice.
func ScopeToRun(query, run string) (string, error) {
	if !runIDRe.MatchString(run) {
		return "", fmt.Errorf("results: run id %q: letters, digits, '.', '_' and '-'", run)
	}
	toks := lexSQL(query)
	known := map[string]bool{}
	for _, t := range RunTables {
		known[t] = true
	}
	var b strings.Builder
	clause := []string{""} // the clause keyword at each depth of parentheses
	prev := ""             // the last significant token, upper-cased
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		up := strings.ToUpper(t.text)
		switch {
		case t.kind == tokPunct && t.text == "(":
			clause = append(clause, "")
		case t.kind == tokPunct && t.text == ")" && len(clause) > 1:
			clause = clause[:len(clause)-1]
		case t.kind == tokWord && clauseWords[up]:
			clause[len(clause)-1] = up
		}
		if t.kind != tokWord && t.kind != tokQuoted || !(prev == "FROM" || prev == "JOIN" || prev == "," && clause[len(clause)-1] == "FROM") {
			b.WriteString(t.text)
			if t.kind != tokSpace && t.kind != tokComment {
				prev = up
			}
			continue
		}
		// A table read: db.name or name.
		end, name := i, identName(t)
		if j := nextSig(toks, i); j > 0 && toks[j].text == "." {
			if k := nextSig(toks, j); k > 0 && (toks[k].kind == tokWord || toks[k].kind == tokQuoted) {
				end, name = k, identName(toks[k])
			}
		}
		if !known[strings.ToLower(name)] {
			for ; i <= end; i++ {
				b.WriteString(toks[i].text)
			}
			i--
			prev = "TABLE"
			continue
		}
		table := ""
		for k := i; k <= end; k++ {
			table += toks[k].text
		}
		fmt.Fprintf(&b, "(SELECT * FROM %s FINAL WHERE run = '%s')", table, run)
		i = end
		if j := nextSig(toks, i); j > 0 && strings.EqualFold(toks[j].text, "FINAL") {
			i = j // the scope reads FINAL already
		}
		if j := nextSig(toks, i); j < 0 || !hasAlias(toks[j]) {
			b.WriteString(" AS " + strings.ToLower(name))
		}
		prev = "TABLE"
	}
	return b.String(), nil
}

// clauseWords start a clause: a table name after FROM (and its commas) or
// JOIN is a table read, after any other it is not.
var clauseWords = map[string]bool{"SELECT": true, "FROM": true, "WHERE": true, "PREWHERE": true, "GROUP": true, "ORDER": true,
	"HAVING": true, "LIMIT": true, "UNION": true, "JOIN": true, "ON": true, "USING": true, "SETTINGS": true, "FORMAT": true,
	"ARRAY": true, "WITH": true, "SAMPLE": true}

// notAlias are words that may follow a table and are not its alias.
var notAlias = map[string]bool{"WHERE": true, "PREWHERE": true, "GROUP": true, "ORDER": true, "HAVING": true, "LIMIT": true,
	"UNION": true, "JOIN": true, "INNER": true, "LEFT": true, "RIGHT": true, "FULL": true, "CROSS": true, "ANY": true, "ALL": true,
	"GLOBAL": true, "ASOF": true, "SEMI": true, "ANTI": true, "ON": true, "USING": true, "SETTINGS": true, "FORMAT": true, "ARRAY": true,
	"SAMPLE": true, "FINAL": true, "INTO": true, "WINDOW": true, "QUALIFY": true, "OFFSET": true}

// hasAlias: t, after a table, is its alias (AS, or a name that is no
// clause's word).
func hasAlias(t sqlToken) bool {
	up := strings.ToUpper(t.text)
	return up == "AS" || t.kind == tokQuoted || t.kind == tokWord && !notAlias[up]
}

func identName(t sqlToken) string {
	if t.kind == tokQuoted && len(t.text) >= 2 {
		return t.text[1 : len(t.text)-1]
	}
	return t.text
}

// nextSig is the index of the next token after i that is neither space nor
// comment, -1 at the end.
func nextSig(toks []sqlToken, i int) int {
	for j := i + 1; j < len(toks); j++ {
		if toks[j].kind != tokSpace && toks[j].kind != tokComment {
			return j
		}
	}
	return -1
}

type tokKind int

const (
	tokWord tokKind = iota
	tokQuoted
	tokString
	tokSpace
	tokComment
	tokPunct
)

type sqlToken struct {
	kind tokKind
	text string
}

// lexSQL cuts a ClickHouse statement into tokens whose texts, joined, are
// the statement: words, quoted identifiers (`x`, "x"), strings ('...' with
// \' and ”), spaces, comments (-- and /* */), one rune of anything else.
// An unterminated string, identifier or comment runs to the end.
func lexSQL(q string) []sqlToken {
	var out []sqlToken
	for i := 0; i < len(q); {
		c := q[i]
		j := i + 1
		kind := tokPunct
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			for j < len(q) && strings.IndexByte(" \t\n\r", q[j]) >= 0 {
				j++
			}
			kind = tokSpace
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			j = i + strings.IndexByte(q[i:]+"\n", '\n')
			kind = tokComment
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			if k := strings.Index(q[i+2:], "*/"); k >= 0 {
				j = i + 2 + k + 2
			} else {
				j = len(q)
			}
			kind = tokComment
		case c == '\'' || c == '"' || c == '`':
			j = quotedEnd(q, i)
			kind = tokQuoted
			if c == '\'' {
				kind = tokString
			}
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			for j < len(q) && (q[j] == '_' || q[j] >= 'a' && q[j] <= 'z' || q[j] >= 'A' && q[j] <= 'Z' || q[j] >= '0' && q[j] <= '9' || q[j] >= 0x80) {
				j++
			}
			kind = tokWord
		case c >= '0' && c <= '9':
			for j < len(q) && (q[j] >= '0' && q[j] <= '9' || q[j] == '.' || q[j] == 'e' || q[j] == 'E' || q[j] == 'x' || q[j] >= 'a' && q[j] <= 'f') {
				j++
			}
			kind = tokString // a number: never a table
		}
		out = append(out, sqlToken{kind, q[i:j]})
		i = j
	}
	return out
}

// quotedEnd is the end of the quoted text opening at i (a backslash
// escapes, a doubled quote is one).
func quotedEnd(q string, i int) int {
	quote := q[i]
	for j := i + 1; j < len(q); j++ {
		switch q[j] {
		case '\\':
			j++
		case quote:
			if j+1 < len(q) && q[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(q)
}
