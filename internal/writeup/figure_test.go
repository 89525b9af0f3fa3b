package writeup

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// TestMetricFigure: hpcq's figure shows each node's metric as the search
// ranked it, and every number it prints is that node's fact; it is an SVG
// rsvg-convert makes a PDF of.
func TestMetricFigure(t *testing.T) {
	nodes := []tree.Node{
		{ID: "n0001", Stage: 1, Metric: 2.5406, HasMetric: true, Q1: 2.4, Q3: 2.6, HasSpread: true},
		{ID: "n0002", Stage: 1, Buggy: true},
		{ID: "n0003", Stage: 1, Metric: 1550.25, HasMetric: true},
		{ID: "n0004", Stage: 2, Metric: 3.1193, HasMetric: true},
	}
	var facts []rundir.Fact
	for _, n := range nodes {
		if n.HasMetric {
			facts = append(facts, rundir.Fact{ID: n.ID + ".value", Value: n.Metric, Unit: "GFLOP/s", Kind: rundir.FactMetric})
		}
	}
	f, ok := metricFigure(nodes, "gflops", "GFLOP/s", facts)
	require.True(t, ok)
	require.Equal(t, "figures/"+MetricFigure, f.Path)
	svg := string(f.Data)
	labels := regexp.MustCompile(`>([0-9][0-9.,]*)</text>`).FindAllStringSubmatch(svg, -1)
	var got []string
	for _, l := range labels {
		got = append(got, l[1])
	}
	require.Equal(t, []string{"2.541", "1,550", "3.119"}, got, "each node's value as \\fact prints it; the buggy node has none")
	for _, l := range got {
		c := Check("it reached "+l+" GFLOP/s", facts, nil)
		require.True(t, c[0].Verified(), "%s is a fact", l)
	}
	require.Contains(t, f.About, "each number it shows is the fact <node>.value")
	_, ok = metricFigure(nodes[:2], "gflops", "GFLOP/s", facts)
	require.False(t, ok, "one node: no figure")

	if _, err := exec.LookPath("rsvg-convert"); err != nil {
		t.Skip("rsvg-convert is not installed (scripts/services.sh install tex): the figure's PDF is not made here")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "f.svg")
	require.NoError(t, os.WriteFile(in, f.Data, 0o644))
	out, err := exec.Command("rsvg-convert", "-f", "pdf", "-o", filepath.Join(dir, "f.pdf"), in).CombinedOutput()
	require.NoError(t, err, string(out))
}
