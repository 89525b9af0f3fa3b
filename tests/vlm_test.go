package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/fakellm"
)

// TestPlotAnalysis: with llm.vlm_model, the plots a node wrote are shown to
// that model: a PNG as image content (its bytes as written), an SVG as its
// source, a .png that is not one left out with the reason. The analysis is
// in result.json, the node's memory, the report, and the Plot feedback of
// the prompt about the node's code. The same run checks the resources: a
// resource the draft's download commands fetched is available in the
// draft's branch (and so in its child's prompts), still pending at the
// root.
func TestPlotAnalysis(t *testing.T) {
	t.Parallel()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range 8 {
		img.Set(i, 7-i, color.RGBA{R: 200, A: 255})
	}
	var pngData bytes.Buffer
	require.NoError(t, png.Encode(&pngData, img))
	script := fmt.Sprintf("echo %s | base64 -d > plot.png\n"+
		"echo '<svg xmlns=\"http://www.w3.org/2000/svg\"><text>score against size</text></svg>' > scaling.svg\n"+
		"echo 'not a picture' > fake.png\n"+
		"echo 'METRIC score=3'\n", base64.StdEncoding.EncodeToString(pngData.Bytes()))
	draft := fakellm.Artifacts([]fakellm.File{{Path: "run.sh", Content: script}}, nil, []string{"bash run.sh"})
	// The download phase "fetches" the resource by its URL.
	var art map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(draft), &art))
	art["phase_artifacts"]["download"] = map[string]any{"commands": []string{"echo fetched https://data.example.org/grid.bin > grid.txt"}}
	data, err := json.Marshal(art)
	require.NoError(t, err)
	draft = string(data)

	var mu sync.Mutex
	var vlm []fakellm.Request
	prompts := map[string]string{}
	srv := fakellm.New(t, func(r fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		if r.Attempt == 1 {
			prompts[r.Kind] = r.Messages[len(r.Messages)-1].Content
		}
		switch r.Kind {
		case "phase0":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", fakellm.Plan("a script that plots"))}
		case "draft":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", draft)}
		case "improve", "debug": // not the draft's files: run, not answered from the result cache
			return fakellm.Reply{Content: fakellm.WithMemory("{}", strings.Replace(draft, "METRIC score=3", "METRIC score=4", 1))}
		case "summary":
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"summary": "a script"}`)}
		case "vlm_analysis":
			vlm = append(vlm, r)
			return fakellm.Reply{Content: fakellm.WithMemory("{}", `{"summary": "the red diagonal falls from left to right: the score drops with size"}`)}
		}
		return fakellm.Reply{Status: 400}
	})
	idea := ideaDir(t, "Print a score and plot it", `metric: {name: score, direction: maximize}
stages:
  initial_implementation: {max_iterations: 2}
  baseline_tuning: {max_iterations: 0}
  creative_research: {max_iterations: 0}
  ablation_studies: {max_iterations: 0}
search: {num_drafts: 1, slots: 1}
phase1: {mode: batch}
llm: {model: test-model, vlm_model: test-vlm}
`)
	require.NoError(t, os.WriteFile(filepath.Join(idea, "resources.yaml"), []byte(`- {name: grid, class: dataset, url: "https://data.example.org/grid.bin"}
`), 0o644))
	runDir := filepath.Join(t.TempDir(), "run-vlm")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY=test-key")
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", runDir, idea)
	require.Equal(t, 0, code, out)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, vlm, 2, "one analysis per node with plots")
	first := vlm[0]
	require.Equal(t, "test-vlm", first.Model, "llm.vlm_model answers it")
	user := first.Messages[len(first.Messages)-1]
	require.Len(t, user.Images, 1)
	require.Equal(t, fakellm.Image{MIME: "image/png", Data: pngData.Bytes()}, user.Images[0], "the PNG as the node wrote it")
	require.Contains(t, user.Content, "plot.png (image/png, ")
	require.Contains(t, user.Content, "attached as image 1")
	require.Contains(t, user.Content, "<text>score against size</text>", "the SVG's source")
	require.Contains(t, user.Content, "fake.png: left out (its content is text/plain; charset=utf-8, not image/png)")
	require.Contains(t, user.Content, "bash run.sh", "the code that made the plots")

	var res map[string]any
	data, err = os.ReadFile(filepath.Join(runDir, "nodes", "n0001", "result.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &res))
	analysis := "the red diagonal falls from left to right: the score drops with size"
	require.Equal(t, analysis, res["plot_analysis"])
	report, err := os.ReadFile(filepath.Join(runDir, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(report), "What the vision model saw in the plots: "+analysis)
	q, code := run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		`SELECT count(*) AS n FROM archival WHERE tags LIKE '%"VLM_ANALYSIS"%' AND tags LIKE '%"plots:n0001"%'`)
	require.Equal(t, 0, code, q)
	require.Equal(t, "n\n1\n", q, "the analysis is in the node's memory")
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT purpose, model, count(*) AS n FROM llm_calls WHERE purpose = 'vlm_analysis' GROUP BY purpose, model")
	require.Equal(t, 0, code, q)
	require.Equal(t, "purpose,model,n\nvlm_analysis,test-vlm,2\n", q)

	// The second node grew from the first: its prompt has the analysis, and
	// the resource the first fetched.
	child := prompts["improve"] + prompts["debug"]
	require.NotEmpty(t, child, "the second node is an improve or debug node")
	require.Contains(t, child, "# Plot feedback")
	require.Contains(t, child, "What the vision model saw in them:\n"+analysis)
	require.Contains(t, child, "- grid (dataset, available): https://data.example.org/grid.bin")
	require.Contains(t, prompts["draft"], "- grid (dataset, pending): https://data.example.org/grid.bin")
	q, code = run(t, env, "scheduler", "query", "--run-dir", runDir, "--format", "csv",
		"SELECT branch, payload FROM recall_events WHERE kind = 'resources_refreshed' ORDER BY branch")
	require.Equal(t, 0, code, q)
	require.True(t, strings.HasPrefix(q, "branch,payload\nn0001,grid: available\n"), q)

	data, err = os.ReadFile(filepath.Join(runDir, "nodes", "n0001", "prompts.jsonl"))
	require.NoError(t, err)
	var logged []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(line, `"purpose":"vlm_analysis"`) {
			logged = append(logged, line)
		}
	}
	require.Len(t, logged, 1)
	require.Contains(t, logged[0], "[image: image/png, ")
	require.NotContains(t, logged[0], `"images"`, "the log names the image, not its bytes")
}
