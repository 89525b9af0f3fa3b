package search

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/schema"
)

func task() *schema.NodeTask {
	return &schema.NodeTask{RunID: "r1", NodeID: "n1", Attempt: 1, Pool: "cpu", Kind: "draft",
		Artifacts: schema.Artifacts{
			Coding:  schema.CodingPhase{Workspace: schema.Workspace{Files: []schema.File{{Path: "a.c", Content: "int a;"}, {Path: "b.c", Content: "int b;", Mode: "0755"}}}},
			Compile: schema.CommandsPhase{Commands: []string{"gcc -O2 a.c b.c"}},
			Run:     schema.RunPhase{Commands: []string{"./a.out"}},
		},
		Env: map[string]string{"A": "1", "B": "2"}, Requires: []string{"openmp", "gcc"}}
}

func TestCacheKey(t *testing.T) {
	t.Parallel()
	tc := map[string]string{"gcc": "12.2.0", "openmp": "gcc"}
	base := CacheKey(task(), tc)

	same := task()
	same.RunID, same.NodeID, same.Attempt, same.Kind, same.ParentID = "r2", "n9", 3, "improve", "n1"
	same.Artifacts.Coding.Workspace.Files[0], same.Artifacts.Coding.Workspace.Files[1] = same.Artifacts.Coding.Workspace.Files[1], same.Artifacts.Coding.Workspace.Files[0]
	same.Artifacts.Coding.Workspace.Files[0].Mode = "755"
	same.Requires = []string{"gcc", "openmp"}
	require.Equal(t, base, CacheKey(same, map[string]string{"openmp": "gcc", "gcc": "12.2.0"}), "ids, order and spellings do not matter")

	for name, change := range map[string]func(*schema.NodeTask){
		"content": func(t *schema.NodeTask) { t.Artifacts.Coding.Workspace.Files[0].Content = "int a = 1;" },
		"path":    func(t *schema.NodeTask) { t.Artifacts.Coding.Workspace.Files[0].Path = "c.c" },
		"mode":    func(t *schema.NodeTask) { t.Artifacts.Coding.Workspace.Files[0].Mode = "0755" },
		"compile": func(t *schema.NodeTask) { t.Artifacts.Compile.Commands[0] = "gcc -O3 a.c b.c" },
		"run":     func(t *schema.NodeTask) { t.Artifacts.Run.Commands = append(t.Artifacts.Run.Commands, "cat out") },
		"env":     func(t *schema.NodeTask) { t.Env["A"] = "2" },
		"limits":  func(t *schema.NodeTask) { t.Limits.RunTimeoutS = 10 },
		"pool":    func(t *schema.NodeTask) { t.Pool = "gpu" },
	} {
		tk := task()
		change(tk)
		require.NotEqual(t, base, CacheKey(tk, tc), name)
	}
	require.NotEqual(t, base, CacheKey(task(), map[string]string{"gcc": "13.1.0", "openmp": "gcc"}), "another compiler version")
}

func TestCachePersists(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cache.journal")
	c, err := OpenCache(path)
	require.NoError(t, err)
	key := CacheKey(task(), nil)
	_, ok := c.Get(key)
	require.False(t, ok)
	require.NoError(t, c.Put(key, schema.NodeResult{NodeID: "n1", Metrics: map[string]float64{"gflops": 3}}))
	require.NoError(t, c.Close())
	c, err = OpenCache(path)
	require.NoError(t, err)
	defer c.Close()
	r, ok := c.Get(key)
	require.True(t, ok)
	require.Equal(t, 3.0, r.Metrics["gflops"])
	require.Equal(t, 1, c.Len())
}
