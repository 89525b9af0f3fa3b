package results

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrRefused is returned, wrapped with the reason, for a query that
// `scheduler query` will not run: more than one statement, or a statement
// that is not a read. The database's own read-only mode stands behind this
// check; the check is there to say plainly why.
var ErrRefused = errors.New("query refused")

// Dialect is the SQL spoken by a results store.
type Dialect string

const (
	// DialectSQLite is the local store's dialect.
	DialectSQLite Dialect = "sqlite"
	// DialectClickHouse is the cluster store's dialect.
	DialectClickHouse Dialect = "clickhouse"
)

// readStatements are the first keywords of the statements a query may be.
var readStatements = map[Dialect][]string{
	DialectSQLite:     {"SELECT", "WITH", "VALUES", "EXPLAIN"},
	DialectClickHouse: {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN"},
}

// CheckStatement returns nil when query is exactly one statement (a
// trailing semicolon is fine) that begins with a read keyword of the
// dialect, and an error wrapping ErrRefused naming the reason otherwise.
// Strings, quoted identifiers and comments are skipped the way each dialect
// reads them, so a semicolon inside a string does not count.
func CheckStatement(d Dialect, query string) error {
	allowed, ok := readStatements[d]
	if !ok {
		return fmt.Errorf("results: unknown dialect %q", d)
	}
	stmts, err := splitStatements(d, query)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRefused, err)
	}
	switch len(stmts) {
	case 0:
		return fmt.Errorf("%w: the query is empty", ErrRefused)
	case 1:
	default:
		return fmt.Errorf("%w: one statement per call, this query has %d (separated by ';')", ErrRefused, len(stmts))
	}
	kw := strings.ToUpper(stmts[0])
	for _, a := range allowed {
		if kw == a {
			return nil
		}
	}
	return fmt.Errorf("%w: queries are read-only: %s may change data or files (allowed: %s)",
		ErrRefused, kw, strings.Join(allowed, ", "))
}

// splitStatements returns the first word of each non-empty statement of
// query (a statement with no word at all, "(", say, gives its first rune).
func splitStatements(d Dialect, query string) ([]string, error) {
	var firsts []string
	inStmt := false
	rs := []rune(query)
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case r == ';':
			inStmt = false
			i++
		case unicode.IsSpace(r):
			i++
		case r == '-' && i+1 < len(rs) && rs[i+1] == '-':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case d == DialectClickHouse && r == '#':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case r == '/' && i+1 < len(rs) && rs[i+1] == '*':
			j := i + 2
			for j+1 < len(rs) && (rs[j] != '*' || rs[j+1] != '/') {
				j++
			}
			if j+1 >= len(rs) {
				return nil, fmt.Errorf("unterminated /* comment")
			}
			i = j + 2
		case r == '\'' || r == '"' || r == '`' || (d == DialectSQLite && r == '['):
			closer := r
			if r == '[' {
				closer = ']'
			}
			j := i + 1
			for ; j < len(rs); j++ {
				if d == DialectClickHouse && rs[j] == '\\' && r != '[' {
					j++ // backslash escapes the next character
					continue
				}
				if rs[j] == closer {
					if closer != ']' && j+1 < len(rs) && rs[j+1] == closer {
						j++ // doubled quote
						continue
					}
					break
				}
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("unterminated %c", r)
			}
			if !inStmt {
				inStmt = true
				firsts = append(firsts, string(r))
			}
			i = j + 1
		default:
			j := i
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			if j == i {
				j = i + 1
			}
			if !inStmt {
				inStmt = true
				firsts = append(firsts, string(rs[i:j]))
			}
			i = j
		}
	}
	return firsts, nil
}
