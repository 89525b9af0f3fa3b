// A run's paper in its directory (paper/): the files' names, and the
// formats of the evidence beside it (facts.json, claims.json). The writeup
// writes them (internal/writeup); the dashboard, the report and the
// commands read them through here.

package rundir

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The paper's directory and its files, relative to the run directory
// (PaperFile) or to the paper's directory.
const (
	PaperDir   = "paper"       // every file of the run's paper
	PaperTeX   = "paper.tex"   // the paper as the model last wrote it (its checked, compiled draft)
	PaperPDF   = "paper.pdf"   // compiled from paper.tex in a task's sandbox
	ClaimsFile = "claims.json" // Claims: every number of the paper and the fact it states
	FactsFile  = "facts.json"  // []Fact: the numbers the results hold, each with its SQL
	FactsTeX   = "facts.tex"   // the macros that state the facts (\fact{ID})
	RefsBib    = "refs.bib"    // the bibliography a paper is compiled with (the idea's)
	PagesDir   = "pages"       // pages/page-N.png: the compiled pages as PNGs
	FiguresDir = "figures"     // figures/<role>-<name>: the plots the paper includes
	DraftsDir  = "drafts"      // drafts/round-N.tex: each round's draft
	BuildDir   = ".build"      // where the paper is compiled (emptied first)
)

// PaperFile is the slash-separated path, relative to the run directory, of
// a file of its paper: PaperFile(PaperTeX), PaperFile(PagesDir, "page-1.png").
func PaperFile(elem ...string) string {
	return path.Join(append([]string{PaperDir}, elem...)...)
}

// DraftFile is round n's draft, relative to the paper's directory.
func DraftFile(n int) string { return path.Join(DraftsDir, fmt.Sprintf("round-%d.tex", n)) }

// PagePrefix starts the name of a compiled page's PNG (pdftoppm's root
// name: page-N.png, N padded to the page count's digits).
const PagePrefix = "page"

// PageNumber is N of a page's page-N.png (pdftoppm pads it to the page
// count's digits: page-01.png of 10 pages; the order is the number's).
func PageNumber(name string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), PagePrefix+"-"), ".png"))
	return n
}

// Pages are the run's compiled pages, relative to the run directory, in
// page order.
func (d Dir) Pages() []string {
	pages, _ := filepath.Glob(filepath.Join(d.Path(PaperFile(PagesDir)), PagePrefix+"-*.png"))
	slices.SortFunc(pages, func(a, b string) int { return PageNumber(a) - PageNumber(b) })
	out := make([]string, len(pages))
	for i, p := range pages {
		out[i] = PaperFile(PagesDir, filepath.Base(p))
	}
	return out
}

// IsPaperFile says whether a path of the run directory (slash-separated
// parts) is one of its paper's files that a reader may be shown: the
// paper, its PDF, claims, facts, pages, figures and drafts (not the build
// directory).
func IsPaperFile(parts []string) bool {
	if len(parts) == 0 || parts[0] != PaperDir {
		return false
	}
	switch len(parts) {
	case 2:
		switch parts[1] {
		case PaperPDF, PaperTeX, ClaimsFile, FactsFile, FactsTeX:
			return true
		}
	case 3:
		return parts[1] == PagesDir || parts[1] == FiguresDir || parts[1] == DraftsDir
	}
	return false
}

// ReadClaims reads the paper's claims.json; ok is false when the run has
// no paper.
func (d Dir) ReadClaims() (c Claims, ok bool, err error) {
	ok, err = ReadJSON(d.Path(PaperFile(ClaimsFile)), &c)
	return c, ok, err
}

// A Number is a numeric literal of the paper's text as a reader sees it:
// where it is (byte offset), what was written, its value and the rounding
// its digits imply (half a unit of its last digit: "842.6" is 842.6 +-
// 0.05).
type Number struct {
	Offset  int     `json:"offset"`
	Text    string  `json:"text"`
	Value   float64 `json:"value"`
	Rounded float64 `json:"rounded"`
	// Percent: written with \% after it; it then also matches a fact that
	// is a fraction (0.4 for "40\%").
	Percent bool `json:"percent,omitempty"`
	// Kind is what the text says the number is (a Literal* kind; "" when
	// it says nothing: a bare number), Unit the unit written after it
	// ("GFLOP/s", "ms"), Negative a minus sign before it, and Direction
	// what the words around it say of a change (+1 faster, higher, a gain;
	// -1 slower, lower, a loss; 0 neither).
	Kind      string `json:"kind,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Negative  bool   `json:"negative,omitempty"`
	Direction int    `json:"direction,omitempty"`
	// Typeset is the number as the paper prints it when Text, where the
	// source has it, is the command that prints it (a macro of the
	// paper's, an \input): "41.0" printed by \score.
	Typeset string `json:"typeset,omitempty"`
}

// Shown is the number as a reader sees it, and the command that printed
// it when the source does not spell it: `41.0 (printed by \score)`.
func (n Number) Shown() string {
	if n.Typeset == "" {
		return n.Text
	}
	return n.Typeset + " (printed by " + n.Text + ")"
}

// What a paper's text says a number is (Number.Kind).
const (
	LiteralRatio   = "ratio"   // 3.2x, 3.2$\times$, "3.2 times", "three-fold", "twice"
	LiteralPercent = "percent" // 40\%, 40 percent
	LiteralUnit    = "unit"    // 842.6 GFLOP/s, 12.7\,\mathrm{s}, 3 ms: Unit says which
)

// Kinds of fact (Fact.Kind): a literal states a fact only of a kind its
// words allow (internal/writeup).
const (
	FactMetric   = "metric"   // a value of a metric, in Unit
	FactRatio    = "ratio"    // one value over another (best over the baseline)
	FactFraction = "fraction" // a relative change (0.51: 51% above), written as a percentage
	FactDelta    = "delta"    // one value minus another, in Unit, with its sign
	FactSeconds  = "seconds"  // a duration, in seconds
	FactCount    = "count"    // how many (nodes)
)

// A Claim is a number checked against the facts: the fact it matches
// (FactID, empty when none does), or the whitelist's reason.
type Claim struct {
	Number
	FactID    string `json:"fact_id,omitempty"`
	Whitelist string `json:"whitelist,omitempty"`
	// Node and SQL are the matched fact's: where the number comes from and
	// the query that gives it.
	Node string `json:"node,omitempty"`
	SQL  string `json:"sql,omitempty"`
	// Context is the text around the number, for the model's feedback and
	// the report.
	Context string `json:"context"`
}

// Verified reports whether a fact or the whitelist accounts for the number.
func (c Claim) Verified() bool { return c.FactID != "" || c.Whitelist != "" }

// A Fact is one number the results tables hold, with what it is, the node
// it belongs to (empty for a run-wide one) and the SQL that produced it, so
// that a reader can run the query again and get the value.
type Fact struct {
	ID    string  `json:"id"`
	Claim string  `json:"claim"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Kind is what the number is (a Fact* kind; "" in a facts.json of an
	// earlier hpcq: any).
	Kind string `json:"kind,omitempty"`
	// Noise, on a difference between two nodes measured with repeats,
	// says that it is inside the noise: their 95% intervals overlap. A
	// paper that states it is told so.
	Noise string `json:"noise,omitempty"`
	Node  string `json:"node,omitempty"`
	SQL   string `json:"sql"`
}

// Report is what checking a paper found: its literals and how each was
// matched, the facts it cites by id and those it names that are none.
type Report struct {
	Numbers      int      `json:"numbers"`
	Verified     int      `json:"verified"`
	Unverified   int      `json:"unverified"`
	Claims       []Claim  `json:"claims"`
	FactsCited   []string `json:"facts_cited"`
	UnknownFacts []string `json:"unknown_facts,omitempty"`
	// Stated are the facts the paper states through \fact and \factpct:
	// each number they print, with its node and query.
	Stated []Fact `json:"stated,omitempty"`
	// InsideNoise are the differences the paper states (a literal or a
	// \fact) that are inside the noise (Fact.Noise): each fact's id and
	// why.
	InsideNoise []string `json:"inside_noise,omitempty"`
}

// UnverifiedClaims are the numbers no fact or whitelist entry accounts for.
func (r Report) UnverifiedClaims() []Claim {
	var out []Claim
	for _, c := range r.Claims {
		if !c.Verified() {
			out = append(out, c)
		}
	}
	return out
}

// Round is what one draft was found to be.
type Round struct {
	Round      int      `json:"round"`
	Purpose    string   `json:"purpose"` // writeup, or the review's revision
	Numbers    int      `json:"numbers"`
	Unverified int      `json:"unverified"`
	Unknown    []string `json:"unknown_facts,omitempty"`
	Removed    []string `json:"citations_removed,omitempty"`
	Compiled   bool     `json:"compiled"`
	Error      string   `json:"compile_error,omitempty"`
	Findings   []string `json:"review_findings,omitempty"`
	// TeX is the draft as it was compiled (its citations removed).
	TeX string `json:"-"`
}

// Claims is paper/claims.json: every number of the paper and the fact it
// states (with its node and query), the facts it states by id, its
// citations and how the rounds went.
type Claims struct {
	Report
	Citations        []string `json:"citations"`
	CitationsRemoved []string `json:"citations_removed,omitempty"`
	Rounds           []Round  `json:"rounds,omitempty"`
	Stopped          string   `json:"stopped,omitempty"`
	// PDF and Pages are the compiled paper's, relative to the paper's
	// directory ("" and 0: it did not compile).
	PDF   string `json:"pdf,omitempty"`
	Pages int    `json:"pages"`
}
