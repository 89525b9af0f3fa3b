// A run's paper as the page shows it: its claims, its rendered pages, the PDF.

package web

import "github.com/hpcq/hpcq/pkg/rundir"

// PaperView is what the run's page says of its paper (paper/claims.json);
// paths are the run directory's, for /files/.
type PaperView struct {
	PDF        string   `json:"pdf,omitempty"`
	Pages      []string `json:"pages,omitempty"`
	TeX        string   `json:"tex"`
	Claims     string   `json:"claims"`
	Numbers    int      `json:"numbers"`
	Verified   int      `json:"verified"`
	Unverified []Claim  `json:"unverified,omitempty"`
	Stated     int      `json:"facts_stated"`
	Citations  int      `json:"citations"`
	Removed    []string `json:"citations_removed,omitempty"`
	Rounds     int      `json:"rounds"`
	Stopped    string   `json:"stopped,omitempty"`
}

// Claim is a number the paper states that no result does.
type Claim struct {
	Text    string `json:"text"`
	Context string `json:"context"`
}

// paperOf reads the run's paper; nil when none was written.
func paperOf(dir string) *PaperView {
	c, ok, err := rundir.Dir(dir).ReadClaims()
	if err != nil || !ok {
		return nil
	}
	p := &PaperView{TeX: rundir.PaperFile(rundir.PaperTeX), Claims: rundir.PaperFile(rundir.ClaimsFile), Numbers: c.Numbers,
		Verified: c.Verified, Stated: len(c.FactsCited), Citations: len(c.Citations), Removed: c.CitationsRemoved, Rounds: len(c.Rounds), Stopped: c.Stopped}
	if c.PDF != "" {
		p.PDF = rundir.PaperFile(c.PDF)
		p.Pages = rundir.Dir(dir).Pages()
	}
	for _, cl := range c.UnverifiedClaims() {
		p.Unverified = append(p.Unverified, Claim{Text: cl.Shown(), Context: cl.Context})
	}
	return p
}
