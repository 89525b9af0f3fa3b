// The checks every message's fields share: ids, subject tokens, commands.

package schema

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidMessage, field, fmt.Sprintf(format, args...))
}

// CheckID checks an id field (run, node, pool, worker): a name of letters,
// digits, '.', '_' and '-' within MaxIDLen.
func CheckID(field, v string, required bool) error {
	if v == "" {
		if required {
			return fieldErr(field, "is required")
		}
		return nil
	}
	if len(v) > MaxIDLen {
		return fieldErr(field, "longer than %d bytes", MaxIDLen)
	}
	if !validID(v) {
		return fieldErr(field, "%q may contain only letters, digits, '_', '-', '.' (not '..'), starting with a letter or digit", v)
	}
	return nil
}

// CheckToken checks an id that becomes one NATS subject token (a run, a
// pool): CheckID without '.', which would split it into two tokens.
func CheckToken(field, v string, required bool) error {
	if err := CheckID(field, v, required); err != nil {
		return err
	}
	if strings.Contains(v, ".") {
		return fieldErr(field, "%q may not contain '.' (it names a NATS subject token)", v)
	}
	return nil
}

// ValidatePool reports whether name can be a pool (a subject token).
func ValidatePool(name string) error { return CheckToken("pool", name, true) }

func checkCommands(field string, cmds []string) error {
	if len(cmds) > MaxCommands {
		return fieldErr(field, "%d commands, at most %d", len(cmds), MaxCommands)
	}
	for i, c := range cmds {
		f := fmt.Sprintf("%s[%d]", field, i)
		if strings.TrimSpace(c) == "" {
			return fieldErr(f, "is empty")
		}
		if len(c) > MaxCommandLen {
			return fieldErr(f, "longer than %d bytes", MaxCommandLen)
		}
		if strings.IndexByte(c, 0) >= 0 {
			return fieldErr(f, "contains a NUL byte")
		}
		if !utf8.ValidString(c) {
			return fieldErr(f, "is not valid UTF-8")
		}
	}
	return nil
}
