// A run's paper as the page shows it: its claims, its rendered pages, the PDF.

package web

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"sort"

	"github.com/hpcq/hpcq/internal/engine"
	"github.com/hpcq/hpcq/internal/writeup"
)

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
	data, err := os.ReadFile(filepath.Join(dir, engine.PaperDir, "claims.json"))
	if err != nil {
		return nil
	}
	var c writeup.Claims
	if json.Unmarshal(data, &c) != nil {
		return nil
	}
	p := &PaperView{TeX: path.Join(engine.PaperDir, "paper.tex"), Claims: path.Join(engine.PaperDir, "claims.json"), Numbers: c.Numbers,
		Verified: c.Verified, Stated: len(c.FactsCited), Citations: len(c.Citations), Removed: c.CitationsRemoved, Rounds: len(c.Rounds), Stopped: c.Stopped}
	if c.PDF != "" {
		p.PDF = path.Join(engine.PaperDir, c.PDF)
		pages, _ := filepath.Glob(filepath.Join(dir, engine.PaperDir, "pages", "page-*.png"))
		sort.Slice(pages, func(i, j int) bool { return writeup.PageNumber(pages[i]) < writeup.PageNumber(pages[j]) })
		for _, pg := range pages {
			p.Pages = append(p.Pages, path.Join(engine.PaperDir, "pages", filepath.Base(pg)))
		}
	}
	for _, cl := range c.UnverifiedClaims() {
		p.Unverified = append(p.Unverified, Claim{Text: cl.Text, Context: cl.Context})
	}
	return p
}

// paperFile: a file of the run's paper the page links.
func paperFile(parts []string) bool {
	if parts[0] != engine.PaperDir {
		return false
	}
	switch len(parts) {
	case 2:
		switch parts[1] {
		case "paper.pdf", "paper.tex", "claims.json", "facts.json", "facts.tex":
			return true
		}
	case 3:
		return parts[1] == "pages" || parts[1] == "figures" || parts[1] == "drafts"
	}
	return false
}
