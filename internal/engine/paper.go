package engine

import (
	"fmt"
	"strings"

	"github.com/hpcq/hpcq/pkg/rundir"
)

// paperSection is report.md's section about the run's paper, from
// paper/claims.json ("" when there is none).
func paperSection(dir string) string {
	c, ok, err := rundir.Dir(dir).ReadClaims()
	if err != nil || !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString("## The paper\n\n")
	if c.PDF != "" {
		fmt.Fprintf(&b, "[%s](%s) (%d pages), ", c.PDF, mdURL(rundir.PaperFile(c.PDF)), c.Pages)
	} else {
		b.WriteString("Not compiled: ")
	}
	fmt.Fprintf(&b, "[%s](%s), [%s](%s): %d numbers written out, %d verified against the results, %d unverified; "+
		"%d facts stated by id; %d citations", rundir.PaperTeX, mdURL(rundir.PaperFile(rundir.PaperTeX)), rundir.ClaimsFile,
		mdURL(rundir.PaperFile(rundir.ClaimsFile)), c.Numbers, c.Verified,
		c.Unverified, len(c.FactsCited), len(c.Citations))
	if len(c.CitationsRemoved) > 0 {
		fmt.Fprintf(&b, ", %d removed (not in %s: %s)", len(c.CitationsRemoved), rundir.RefsBib, strings.Join(c.CitationsRemoved, ", "))
	}
	if len(c.Rounds) > 0 {
		fmt.Fprintf(&b, "; %d rounds", len(c.Rounds))
	}
	b.WriteString(".\n")
	if c.Unverified > 0 {
		b.WriteString("\n**Numbers no result states** (the paper says so on its first page):\n\n")
		for _, cl := range c.UnverifiedClaims() {
			fmt.Fprintf(&b, "- `%s` in \"%s\"\n", cl.Shown(), mdText(cl.Context))
		}
	}
	if c.Stopped != "" {
		fmt.Fprintf(&b, "\nThe rounds stopped early: %s.\n", mdText(c.Stopped))
	}
	return b.String()
}
