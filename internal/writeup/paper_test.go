package writeup

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

func TestCitations(t *testing.T) {
	bib := "@article{williams2009roofline,\n  title={Roofline},\n}\n@inproceedings{ Datta08 , title={Stencil}}\n"
	tex := `As \cite{williams2009roofline} and \citep[p.~3]{Datta08, invented2024} show; \citeauthor{williams2009roofline}. % \cite{commented}`
	keys, unknown := Citations(tex, bib)
	require.Equal(t, []string{"williams2009roofline", "Datta08", "invented2024"}, keys)
	require.Equal(t, []string{"invented2024"}, unknown)
}

func TestPaperTask(t *testing.T) {
	task := PaperTask("r1", 2, []schema.File{{Path: rundir.PaperTeX, Content: "x"}, {Path: rundir.FactsTeX, Content: "y"}})
	require.NoError(t, task.Validate())
	require.Equal(t, rundir.FactsTeX, task.Artifacts.Coding.Workspace.Files[0].Path)
	require.True(t, task.Limits.NoNetwork())
	require.Equal(t, 2, task.Attempt)

	task = PaperTask("r1", 1, []schema.File{{Path: rundir.PaperTeX}, {Path: rundir.FiguresDir + "/best-scaling.svg"}, {Path: rundir.FiguresDir + "/a b;rm x.svg"}})
	require.Equal(t, []string{texEnv + "rsvg-convert -f pdf -o figures/best-scaling.pdf figures/best-scaling.svg",
		texEnv + "latexmk -norc -pdf -no-shell-escape -interaction=nonstopmode -halt-on-error -file-line-error paper.tex"}, task.Artifacts.Compile.Commands,
		"a path a command line cannot hold as it is is not converted; every command in TeX's bounded environment")
	require.Equal(t, []string{texEnv + "pdftoppm -r 60 -l 30 -png paper.pdf page"}, task.Artifacts.Run.Commands)
}

func TestReferencesBib(t *testing.T) {
	bib := "@article{stream,\n  title={STREAM}\n}"
	got := ReferencesBib(bib, []Reference{{Name: "STREAM", URL: "https://www.cs.virginia.edu/stream/ref_50%.html", Summary: "McCalpin's benchmark"},
		{Name: "Roofline & co_2", Path: "papers/roofline.pdf"}, {Name: "!!!"}})
	require.Equal(t, []string{"stream", "stream2", "rooflineco2", "resource3"}, BibKeys(got))
	require.Contains(t, got, `title = {Roofline \& co\_2}`)
	require.Contains(t, got, `note = {McCalpin's benchmark. https://www.cs.virginia.edu/stream/ref\_50\%.html}`)
	require.Equal(t, bib, ReferencesBib(bib, nil))
}

// TestCitationsThroughAliases: a citation through an alias the paper makes
// (\let, \newcommand) and a bibliography the paper writes itself are
// checked like \cite: a key the run was not given is unknown, and taken
// out of the paper.
func TestCitationsThroughAliases(t *testing.T) {
	bib := "@article{williams2009roofline,\n  title={Roofline},\n}\n"
	tex := `\let\mycite\cite
\newcommand{\refs}[1]{\citep{#1}}
\def\see#1{\cite{#1}}
As shown \mycite{invented2024} and \refs{williams2009roofline,made2023}, also \see{third2022}.
\begin{thebibliography}{9}
\bibitem{williams2009roofline} S. Williams. Roofline. 2009.
\bibitem[Doe(2021)]{doe2021} J. Doe. A paper the run was not given. 2021.
\end{thebibliography}`
	keys, unknown := Citations(tex, bib)
	require.Equal(t, []string{"invented2024", "williams2009roofline", "made2023", "third2022", "doe2021"}, keys)
	require.Equal(t, []string{"invented2024", "made2023", "third2022", "doe2021"}, unknown)
	clean := RemoveCitations(tex, unknown)
	require.NotContains(t, clean, "invented2024")
	require.NotContains(t, clean, "made2023")
	require.NotContains(t, clean, "doe2021")
	require.NotContains(t, clean, "third2022")
	require.NotContains(t, clean, "A paper the run was not given")
	require.Contains(t, clean, `\refs{williams2009roofline}`)
	require.Contains(t, clean, `\bibitem{williams2009roofline} S. Williams. Roofline. 2009.`)
	require.Contains(t, clean, `\end{thebibliography}`)
	_, unknown = Citations(clean, bib)
	require.Empty(t, unknown)
}
