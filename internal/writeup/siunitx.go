// siunitx's quantities as they are typeset: \SI{3.2}{\giga\flops} and
// \qty{12.7}{\second} print the number and its unit, \num{1234} the
// number, \si{\milli\second} and \unit{...} the unit.

package writeup

import "strings"

// siPrefixes and siUnits are siunitx's unit macros as they print.
var (
	siPrefixes = map[string]string{"kilo": "k", "mega": "M", "giga": "G", "tera": "T", "peta": "P", "exa": "E",
		"milli": "m", "micro": "u", "nano": "n", "pico": "p", "kibi": "Ki", "mebi": "Mi", "gibi": "Gi", "tebi": "Ti"}
	siUnits = map[string]string{"second": "s", "s": "s", "byte": "B", "bit": "bit", "hertz": "Hz", "Hz": "Hz", "watt": "W",
		"joule": "J", "metre": "m", "meter": "m", "percent": `\%`, "minute": "min", "hour": "h", "flops": "FLOP/s", "flop": "FLOP"}
)

// siunitx prints the siunitx command name (whose name ends at j) as
// typeset; ok is false for another command.
func (x *expander) siunitx(b *builder, in typeset, name string, i, j, depth, inputs int) (int, bool) {
	var n int // the number arguments
	var unit bool
	switch name {
	case "SI", "qty":
		n, unit = 1, true
	case "num":
		n = 1
	case "si", "unit":
		unit = true
	case "SIrange", "qtyrange":
		n, unit = 2, true
	case "numrange":
		n = 2
	default:
		return j, false
	}
	t := in.text
	k := skipSpace(t, j)
	if k < len(t) && t[k] == '[' { // options
		k = skipSpace(t, matching(t, k))
	}
	var groups []typeset
	end := k
	for range n + btoi(unit) {
		if k >= len(t) || t[k] != '{' {
			return j, false
		}
		end = matching(t, k)
		groups = append(groups, in.slice(k+1, max(k+1, end-1)))
		k = skipSpace(t, end)
	}
	for g := range n {
		if g > 0 {
			b.print("--", in.from[i])
		}
		b.copy(x.scan(groups[g], depth+1, inputs))
	}
	if unit {
		if n > 0 {
			b.print(`\,`, in.from[i])
		}
		b.print(x.unitText(groups[n].text), in.from[i])
	}
	return end, true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unitText is a siunitx unit as printed: \giga\flops GFLOP/s,
// \mega\byte\per\second MB/s; text in it is kept, other commands dropped.
func (x *expander) unitText(u string) string {
	var out strings.Builder
	for i := 0; i < len(u); {
		if u[i] != '\\' {
			if u[i] != ' ' && u[i] != '{' && u[i] != '}' {
				out.WriteByte(u[i])
			}
			i++
			continue
		}
		j := i + 1
		for j < len(u) && isLetter(u[j]) {
			j++
		}
		name := u[i+1 : j]
		switch {
		case name == "per":
			out.WriteByte('/')
		case x.units[name] != "":
			out.WriteString(x.units[name])
		case siPrefixes[name] != "":
			out.WriteString(siPrefixes[name])
		case siUnits[name] != "":
			out.WriteString(siUnits[name])
		}
		i = max(j, i+2)
	}
	return out.String()
}
