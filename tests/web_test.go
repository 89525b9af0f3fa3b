package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/search"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// browser is a headless Chromium driven through the DevTools protocol: it
// records what the page reports as errors (exceptions, console errors,
// failed loads), and saves a screenshot when the test fails.
type browser struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

const chromiumPath = "/usr/bin/chromium"

func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: scripts/services.sh install chromium", chromiumPath)
		}
		t.Skipf("headless browser tests need Debian's chromium (%s; scripts/services.sh install chromium)", chromiumPath)
	}
	// The profile is not in t.TempDir: Chromium's helpers may still write
	// there for a moment after it is told to stop.
	profile, err := os.MkdirTemp("", "hpcq-chromium-")
	require.NoError(t, err)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(profile), chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		for i := 0; i < 20 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond) //nolint:forbidigo // Chromium's profile is released a moment after it exits
		}
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			b.errs = append(b.errs, "exception: "+msg)
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.LevelError {
				b.errs = append(b.errs, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	// The first Run starts the browser; on ctx itself, so that it lives as
	// long as ctx (one on a context with a timeout would end with it).
	require.NoError(t, chromedp.Run(ctx, cdplog.Enable()))
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var png []byte
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err == nil {
			p := filepath.Join(os.TempDir(), "hpcq-"+strings.ReplaceAll(t.Name(), "/", "-")+".png")
			if os.WriteFile(p, png, 0o644) == nil {
				t.Logf("screenshot of the page when the test failed: %s", p)
			}
		}
	})
	return b
}

func (b *browser) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Run(ctx, actions...))
}

// text is the text of the first element matching sel.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	var s string
	b.run(t, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

func (b *browser) count(t *testing.T, sel string) int {
	t.Helper()
	var n int
	b.run(t, chromedp.Evaluate(fmt.Sprintf("document.querySelectorAll(%q).length", sel), &n))
	return n
}

// waitFor waits until the JavaScript expression is true.
// waitFor waits until expr is true in the page: up to a minute of the
// page answering "not yet". While the page does not answer at all (its
// main thread busy drawing, as under a loaded machine), the minute does
// not run: the wait follows the page's own readiness, up to 5 minutes in
// all.
func (b *browser) waitFor(t *testing.T, what, expr string) {
	t.Helper()
	start := time.Now()
	answered := time.Duration(0) // time the page spent answering "not yet"
	for {
		var ok bool
		poll := time.Now()
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		err := chromedp.Run(ctx, chromedp.Evaluate(expr, &ok))
		cancel()
		if err == nil && ok {
			return
		}
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			answered += time.Since(poll)
		}
		if answered > 60*time.Second || time.Since(start) > 5*time.Minute {
			t.Fatalf("timed out after %v (the page answering for %v of it) waiting for %s (last error: %v)", time.Since(start).Round(time.Second),
				answered.Round(time.Second), what, err)
		}
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // polling the page
		answered += 100 * time.Millisecond
	}
}

func (b *browser) requireNoErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(t, b.errs, "the page reported errors")
}

var dashboardURL = regexp.MustCompile(`dashboard: (http://\S+/)`)

func waitDashboard(t *testing.T, p *proc) string {
	t.Helper()
	var url string
	testutil.Eventually(t, 60*time.Second, "the dashboard's address", func() bool {
		m := dashboardURL.FindStringSubmatch(p.output())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	return url
}

// TestDashboardLive: `scheduler run --http` serves the run as it goes: a
// node changes state on the page without a reload; clicking it shows its
// code and logs; the API key never reaches the page.
func TestDashboardLive(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	shared := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.Mkdir(shared, 0o777))
	require.NoError(t, os.Chmod(shared, 0o777))
	const key = "hpcq-browser-key-5521"
	srv := draftsLLM(t, func(n int) string {
		return runScript(fmt.Sprintf("# deploy key %s\nwhile [ ! -e %s/go%d ]; do sleep 0.1; done\necho 'line for the log %d'\necho 'METRIC score=%d'\n",
			key, shared, n, n, n))
	})
	idea := writeIdea(t, 2, 1)
	runDir := filepath.Join(t.TempDir(), "run-web")
	env := baseEnv(t, "OPENAI_BASE_URL="+srv.BaseURL(), "OPENAI_API_KEY="+key, "HPCQ_SANDBOX_WRITABLE="+shared)
	p := start(t, env, "scheduler", "run", "--local", "--run-dir", runDir, "--http", "127.0.0.1:0", idea)
	url := waitDashboard(t, p)

	b.run(t, chromedp.Navigate(url+"#/run/run-web"), chromedp.WaitVisible(`.node[data-node="n0001"]`, chromedp.ByQuery))
	b.waitFor(t, "n0001 shown as running", `document.querySelector('.node[data-node="n0001"]').dataset.status === 'running'`)
	b.run(t, chromedp.Evaluate(`window.hpcqMark = 42`, nil))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "go1"), nil, 0o644))
	b.waitFor(t, "n0001 shown as ok, live", `document.querySelector('.node[data-node="n0001"]').dataset.status === 'ok'`)
	var mark int
	b.run(t, chromedp.Evaluate(`window.hpcqMark`, &mark))
	require.Equal(t, 42, mark, "the page changed without a reload")

	b.run(t, chromedp.Click(`.node[data-node="n0001"]`, chromedp.ByQuery), chromedp.WaitVisible(`.tabs button[data-tab="code"]`, chromedp.ByQuery),
		chromedp.Click(`.tabs button[data-tab="code"]`, chromedp.ByQuery))
	code := b.text(t, `#tab[data-tab="code"] pre.code`)
	require.Contains(t, code, "echo 'METRIC score=1'")
	require.Contains(t, code, "deploy key [REDACTED]")
	b.run(t, chromedp.Click(`.tabs button[data-tab="logs"]`, chromedp.ByQuery))
	require.Contains(t, b.text(t, `#tab[data-tab="logs"] pre[data-log="run.log"]`), "line for the log 1")
	var html string
	b.run(t, chromedp.OuterHTML("html", &html, chromedp.ByQuery))
	require.NotContains(t, html, key)
	require.Equal(t, 2, b.count(t, ".node"))
	// A run without a paper: nothing where its card would be (no "null").
	var texts []string
	b.run(t, chromedp.Evaluate(`(() => { const w = document.createTreeWalker(document.getElementById('main'), NodeFilter.SHOW_TEXT), out = [];
		while (w.nextNode()) { const s = w.currentNode.textContent.trim(); if (['null', 'undefined', 'NaN', '[object Object]'].includes(s)) out.push(s); }
		return out; })()`, &texts))
	require.Empty(t, texts, "stray text on the run's page")
	require.Zero(t, b.count(t, ".card.paper"))
	b.requireNoErrors(t)

	require.NoError(t, os.WriteFile(filepath.Join(shared, "go2"), nil, 0o644))
	require.Equal(t, 0, p.wait(t, 90*time.Second), p.output())
}

// TestDashboardFinishedRuns: `scheduler serve` over the runs of the bundled
// example: the runs list compares two runs in one chart; a run's page shows
// every node of its tree; a node's panel its code, logs, memory and LLM
// calls; no errors on any page. With HPCQ_SCREENSHOT=FILE it saves the
// screenshot the README shows.
func TestDashboardFinishedRuns(t *testing.T) {
	t.Parallel()
	requireTool(t, "gcc")
	b := newBrowser(t)
	runs := filepath.Join(t.TempDir(), "runs")
	env := baseEnv(t, "HPCQ_RUNS_DIR="+runs)
	out, code := run(t, env, "scheduler", "run", "--local", "--run-dir", filepath.Join(runs, "stencil-a"), "../examples/stencil-omp")
	require.Equal(t, 0, code, out)
	// The run's best: the held-out gate's (the search's best may be wrong
	// on the held-out inputs).
	best := regexp.MustCompile(`held_out_best=(n\d+) `).FindStringSubmatch(out)[1]
	// A second run to compare with: the same, copied.
	require.NoError(t, exec.Command("cp", "-a", filepath.Join(runs, "stencil-a"), filepath.Join(runs, "stencil-b")).Run())
	ls, code := run(t, env, "scheduler", "ls", "--run-dir", filepath.Join(runs, "stencil-a"))
	require.Equal(t, 0, code, ls)
	nodes := len(strings.Split(strings.TrimSpace(ls), "\n")) - 1

	p := start(t, env, "scheduler", "serve", "--http", "127.0.0.1:0")
	url := waitDashboard(t, p)
	m := scrape(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"))
	require.Contains(t, m, "process_cpu_seconds_total", "serve has /metrics")
	require.Contains(t, m, `hpcq_serve_runs{status="done"} 2`, "and the runs it serves, by status")
	require.Regexp(t, `hpcq_serve_nodes\{status="ok"\} \d+`, m)

	b.run(t, chromedp.Navigate(url), chromedp.WaitVisible(`tr[data-run="stencil-a"]`, chromedp.ByQuery))
	b.waitFor(t, "the comparison chart of the two runs", `document.querySelectorAll('#compare svg path.series').length === 2`)

	b.run(t, chromedp.Navigate(url+"#/run/stencil-a/node/"+best), chromedp.WaitVisible(`.node[data-node="`+best+`"]`, chromedp.ByQuery))
	require.Equal(t, nodes, b.count(t, ".node"), "every node of the tree is on the page")
	checkPaperCard(t, b, url)
	require.Equal(t, 1, b.count(t, ".node .star"), "the best node is marked")
	require.Equal(t, 1, b.count(t, `.node[data-node="`+best+`"] .gate`), "and the held-out gate's verdict on it")
	require.GreaterOrEqual(t, b.count(t, ".node .gate"), 2, "on every gated node")
	resp, err := http.Get(url + "api/runs/stencil-a")
	require.NoError(t, err)
	var detail struct {
		BestPath []string `json:"best_path"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&detail))
	resp.Body.Close()
	require.NotEmpty(t, detail.BestPath)
	require.Equal(t, best, detail.BestPath[len(detail.BestPath)-1])
	require.Equal(t, len(detail.BestPath), b.count(t, ".node.best-path"), "and its path from the root")
	b.waitFor(t, "the node panel", `!!document.querySelector('#panel h1') && document.querySelector('#panel h1').textContent.startsWith('`+best+`')`)
	b.waitFor(t, "the charts", `document.querySelectorAll('#charts svg').length === 3`)
	require.Contains(t, b.text(t, "#charts"), "node number (n0007 is 7)", "the per-node chart's x axis is the node's number")
	require.Contains(t, b.text(t, `.stage[data-stage="1"] h2`), "initial implementation", "stage names from the API")
	if shot := os.Getenv("HPCQ_SCREENSHOT"); shot != "" {
		var png []byte
		b.run(t, chromedp.CaptureScreenshot(&png))
		require.NoError(t, os.WriteFile(shot, png, 0o644))
	}
	b.run(t, chromedp.Click(`.tabs button[data-tab="code"]`, chromedp.ByQuery))
	require.Contains(t, b.text(t, `#tab[data-tab="code"] pre.code`), "omp")
	b.run(t, chromedp.Click(`.tabs button[data-tab="logs"]`, chromedp.ByQuery))
	require.Contains(t, b.text(t, `#tab[data-tab="logs"] pre[data-log="run.log"]`), "METRIC gflops=")
	b.run(t, chromedp.Click(`.tabs button[data-tab="memory"]`, chromedp.ByQuery))
	require.Contains(t, b.text(t, `#tab[data-tab="memory"]`), "CURRENT_STAGE", "the core the branch sees")
	b.run(t, chromedp.Click(`.tabs button[data-tab="llm"]`, chromedp.ByQuery))
	require.Regexp(t, `[1-9]\d* calls`, b.text(t, `#tab[data-tab="llm"]`))
	require.True(t, strings.HasPrefix(b.text(t, `#tab[data-tab="llm"] tr:nth-child(2) td:nth-child(2)`), "phase0"), "calls in the order they were made: Phase 0 first")
	// The node's prompt log: one link, to a file the server serves.
	var href string
	b.run(t, chromedp.AttributeValue(`#tab[data-tab="llm"] a[href$="/prompts.md"]`, "href", &href, nil, chromedp.ByQuery))
	if shot := os.Getenv("HPCQ_SCREENSHOT_LLM"); shot != "" {
		var png []byte
		b.run(t, chromedp.ScrollIntoView(`#tab[data-tab="llm"] a[href$="/prompts.md"]`, chromedp.ByQuery), chromedp.FullScreenshot(&png, 100))
		require.NoError(t, os.WriteFile(shot, png, 0o644))
	}
	resp, err = http.Get(strings.TrimSuffix(url, "/") + href)
	require.NoError(t, err)
	log, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(log))
	require.True(t, strings.HasPrefix(string(log), "# 001 phase0 of "+best+" (attempt 1)"), string(log[:min(len(log), 200)]))
	b.run(t, chromedp.Click(`.tabs button[data-tab="plots"]`, chromedp.ByQuery))
	require.Contains(t, strings.ToLower(b.text(t, `#tab[data-tab="plots"]`)), "what the vision model saw", "the example's plot review (llm.vision)")
	require.Equal(t, 1, b.count(t, `#tab[data-tab="plots"] img[alt="scaling.svg"]`))
	if shot := os.Getenv("HPCQ_SCREENSHOT_PLOTS"); shot != "" {
		var png []byte
		b.run(t, chromedp.FullScreenshot(&png, 100))
		require.NoError(t, os.WriteFile(shot, png, 0o644))
	}
	b.requireNoErrors(t)
}

// checkPaperCard: the example's paper (run.yaml writeup.enabled) is on
// the run's page: its links, its claims, its pages; the PDF is a download.
func checkPaperCard(t *testing.T, b *browser, url string) {
	t.Helper()
	b.waitFor(t, "the paper card", `!!document.querySelector('.card.paper')`)
	card := b.text(t, ".card.paper")
	require.Regexp(t, `\d+ numbers written out, \d+ verified, 0 unverified; \d+ facts stated by id; 3 citations, 1 removed \(holewinski2012\); [3-9] rounds`, card)
	if _, err := exec.LookPath("latexmk"); err != nil {
		require.Contains(t, card, "not compiled")
		return
	}
	b.waitFor(t, "the paper's pages", `document.querySelectorAll('.card.paper .pages img').length >= 1 && [...document.querySelectorAll('.card.paper .pages img')].every(i => i.complete && i.naturalWidth > 0)`)
	if shot := os.Getenv("HPCQ_SCREENSHOT_PAPER"); shot != "" {
		var png []byte
		b.run(t, chromedp.ScrollIntoView(".card.paper", chromedp.ByQuery), chromedp.FullScreenshot(&png, 100))
		require.NoError(t, os.WriteFile(shot, png, 0o644))
	}
	resp, err := http.Get(url + "api/runs/stencil-a/files/paper/paper.pdf")
	require.NoError(t, err)
	pdf, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(string(pdf), "%PDF-"))
	require.Equal(t, `attachment; filename="stencil-a-paper.pdf"`, resp.Header.Get("Content-Disposition"), "the model's PDF is downloaded, not shown")
}

// TestDashboardBigTree: a run of 3,000 nodes is drawn in part, quickly: a
// long list of siblings shows the best of them and a button for the
// others, a big subtree off the best path a button for its nodes; what
// the buttons open is drawn; a node not drawn is drawn when its page is
// opened; the per-node chart draws at most a thousand points and says so.
func TestDashboardBigTree(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	const nodes = 3000
	runDir := filepath.Join(t.TempDir(), "run-big")
	writeBigRun(t, runDir, nodes)
	p := start(t, baseEnv(t), "scheduler", "serve", "--run-dir", runDir, "--http", "127.0.0.1:0")
	url := waitDashboard(t, p)

	b.run(t, chromedp.Navigate(url+"#/run/run-big"), chromedp.WaitVisible(`.node[data-node="n0001"]`, chromedp.ByQuery))
	b.waitFor(t, "the per-node chart", `[...document.querySelectorAll('#charts .hint')].some(p => p.textContent.includes('points drawn'))`)
	drawn := b.count(t, ".node")
	require.Less(t, drawn, 400, "a part of the tree is drawn")
	require.Positive(t, b.count(t, ".more"), "with buttons for the rest")
	require.Equal(t, 1, b.count(t, ".node .star"), "the best node is drawn")
	require.Contains(t, b.text(t, "#charts"), "of "+strconv.Itoa(nodes)+" points drawn")
	require.LessOrEqual(t, b.count(t, "#charts circle"), 2*1000+10, "at most a thousand points a chart")

	// A list's button draws its nodes.
	var label string
	b.run(t, chromedp.Text(`.more[data-open^="list:"]`, &label, chromedp.ByQuery))
	hidden, err := strconv.Atoi(regexp.MustCompile(`^\+ (\d+) more`).FindStringSubmatch(label)[1])
	require.NoError(t, err, label)
	b.run(t, chromedp.Click(`.more[data-open^="list:"]`, chromedp.ByQuery))
	b.waitFor(t, "the list's other nodes", fmt.Sprintf(`document.querySelectorAll('.node').length >= %d`, drawn+hidden))

	// A node not drawn, opened by its address: drawn and selected.
	var missing string
	b.run(t, chromedp.Evaluate(`[...view.nodes.keys()].find(id => !document.querySelector('.node[data-node="' + id + '"]')) || ''`, &missing))
	require.NotEmpty(t, missing, "some node is not drawn")
	b.run(t, chromedp.Navigate(url+"#/run/run-big/node/"+missing))
	b.waitFor(t, missing+" drawn and selected", `!!document.querySelector('.node.sel[data-node="`+missing+`"]')`)
	b.requireNoErrors(t)
}

// writeBigRun writes a finished tree search of n nodes as the engine lays
// it out (run.json, the tree journal, each node's task.json and
// result.json), grown by the real search with a metric that makes a new
// best now and then.
func writeBigRun(t *testing.T, dir string, n int) {
	t.Helper()
	d := rundir.Dir(dir)
	require.NoError(t, os.MkdirAll(d.Path(rundir.JournalDir), 0o755))
	require.NoError(t, d.WriteInfo(rundir.Info{RunID: d.ID(), Command: "run", Mode: "local", NATSURL: "embedded",
		Results: map[string]string{"store": "sqlite"}, Started: time.Now().UTC()}))
	spec := `{"Idea":"A big tree.","Metric":{"Name":"score","Direction":"maximize","Unit":"points"}}`
	require.NoError(t, os.WriteFile(d.Path(rundir.SpecFile), []byte(spec), 0o644))
	start := time.Now().Add(-time.Duration(n) * time.Second).UTC()
	tr, err := search.OpenTree(d.Path(rundir.TreeJournal))
	require.NoError(t, err)
	var mu sync.Mutex
	var failed error
	runner := search.RunnerFunc(func(_ context.Context, node *tree.Node) (search.Result, error) {
		i, _ := strconv.Atoi(node.ID[1:])
		metric := float64((i * 7919) % 1009)
		task := fmt.Sprintf(`{"v":1,"run_id":%q,"node_id":%q,"attempt":1,"kind":%q,"stage":1}`, d.ID(), node.ID, node.Kind)
		result := fmt.Sprintf(`{"node":%q,"buggy":false,"metric":%g,"result":{"v":1,"run_id":%q,"node_id":%q,"attempt":1,"worker":"w1",`+
			`"started":%q,"duration_ms":5,"phases":[],"metrics":{"score":%g}}}`,
			node.ID, metric, d.ID(), node.ID, start.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), metric)
		for name, data := range map[string]string{rundir.TaskFile: task, rundir.ResultFile: result} {
			path := d.Path(rundir.NodeFile(node.ID, name))
			if err := errors.Join(os.MkdirAll(filepath.Dir(path), 0o755), os.WriteFile(path, []byte(data), 0o644)); err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		}
		return search.Result{Metric: metric, HasMetric: true}, nil
	})
	search.Run(context.Background(), tr, search.Policy{NumDrafts: 40, Maximize: true, Stage: 1}, runner, 4, n, search.Async)
	require.NoError(t, tr.Close())
	require.NoError(t, failed)
}
