package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPaperLayout pins the names a reader of a run directory finds its paper
// by (the dashboard's links, report.md's, the commands' lines).
func TestPaperLayout(t *testing.T) {
	t.Parallel()
	require.Equal(t, "paper/paper.tex", PaperFile(PaperTeX))
	require.Equal(t, "paper/claims.json", PaperFile(ClaimsFile))
	require.Equal(t, "paper/facts.json", PaperFile(FactsFile))
	require.Equal(t, "paper/facts.tex", PaperFile(FactsTeX))
	require.Equal(t, "paper/paper.pdf", PaperFile(PaperPDF))
	require.Equal(t, "drafts/round-3.tex", DraftFile(3))
	require.Equal(t, 12, PageNumber("paper/pages/page-12.png"))
	require.Equal(t, 1, PageNumber("page-01.png"), "pdftoppm pads to the page count's digits")

	for _, ok := range []string{"paper/paper.pdf", "paper/paper.tex", "paper/claims.json", "paper/facts.json", "paper/facts.tex",
		"paper/pages/page-1.png", "paper/figures/best-a.png", "paper/drafts/round-1.tex"} {
		require.True(t, IsPaperFile(strings.Split(ok, "/")), ok)
	}
	for _, no := range []string{"paper", "paper/.build/paper.log", "paper/nodes/paper/prompts.md", "paper/pages/x/y.png", "nodes/n1/paper.tex", "paper/refs.bib"} {
		require.False(t, IsPaperFile(strings.Split(no, "/")), no)
	}
}

// TestPagesInPageOrder: page-10 after page-9, whatever the padding.
func TestPagesInPageOrder(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	require.NoError(t, os.MkdirAll(d.Path(PaperFile(PagesDir)), 0o755))
	for _, n := range []string{"page-10.png", "page-9.png", "page-1.png", "notes.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(d.Path(PaperFile(PagesDir)), n), nil, 0o644))
	}
	require.Equal(t, []string{"paper/pages/page-1.png", "paper/pages/page-9.png", "paper/pages/page-10.png"}, d.Pages())
}

// TestReadClaims: none, one, and a broken one (an error naming the file).
func TestReadClaims(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	_, ok, err := d.ReadClaims()
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, os.MkdirAll(d.Path(PaperDir), 0o755))
	require.NoError(t, os.WriteFile(d.Path(PaperFile(ClaimsFile)),
		[]byte(`{"numbers":2,"verified":1,"unverified":1,"claims":[{"text":"4.3","context":"x","fact_id":"best"},{"text":"9.9","context":"y"}],"facts_cited":null,"citations":[],"pdf":"paper.pdf","pages":1}`), 0o644))
	c, ok, err := d.ReadClaims()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "paper.pdf", c.PDF)
	require.Len(t, c.UnverifiedClaims(), 1)
	require.Equal(t, "9.9", c.UnverifiedClaims()[0].Text)
	require.NoError(t, os.WriteFile(d.Path(PaperFile(ClaimsFile)), []byte(`{"numbers":`), 0o644))
	_, _, err = d.ReadClaims()
	require.ErrorContains(t, err, "claims.json")
}
