package memory_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/memory"
)

func TestResources(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data", "grids"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "data", "input.txt"), []byte("grid 1024x1024\nsteps 200\n"), 0o644))
	yml := filepath.Join(dir, "resources.yaml")
	require.NoError(t, os.WriteFile(yml, []byte(`resources:
  - name: input
    class: local_data
    path: data/input.txt
    summary: the stencil's input grid
  - name: grids
    class: dataset
    path: data
  - name: himeno
    class: code
    url: https://example.org/himeno.tar.gz
`), 0o644))
	idx, err := memory.LoadResources(yml, dir)
	require.NoError(t, err)
	require.Len(t, idx.Items, 3)
	require.Equal(t, memory.ResourceAvailable, idx.Items[0].FetchStatus)
	require.Equal(t, "grid 1024x1024\nsteps 200\n", idx.Items[0].ContentExcerpt)
	require.Contains(t, idx.Items[1].TreeSummary, "2 entries: grids/, input.txt")
	require.Equal(t, memory.ResourcePending, idx.Items[2].FetchStatus)
	require.Contains(t, idx.Digest, "sha256:")

	// The same list as JSON has the same digest.
	js := filepath.Join(dir, "resources.json")
	require.NoError(t, os.WriteFile(js, []byte(`[{"name":"input","class":"local_data","path":"data/input.txt","summary":"the stencil's input grid"},
	  {"name":"grids","class":"dataset","path":"data"},{"name":"himeno","class":"code","url":"https://example.org/himeno.tar.gz"}]`), 0o644))
	idx2, err := memory.LoadResources(js, dir)
	require.NoError(t, err)
	require.Equal(t, idx.Digest, idx2.Digest)
	require.NotEqual(t, idx.ResourceFileSHA, idx2.ResourceFileSHA)

	m := newMemory(t, memory.Config{}, memory.Options{})
	require.NoError(t, m.IngestResources(ctx, "root", idx))
	hits, err := m.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: "root", Query: "input grid", Tags: []string{"resource:local_data:input"}})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	require.Contains(t, hits[0].Tags, "resource_path:data/input.txt")
	r, err := m.RenderForPrompt(ctx, "root", "stencil", 24000)
	require.NoError(t, err)
	require.Contains(t, r.Text, `"fetch_status":"pending"`)

	_, err = m.Fork(ctx, "child", "root")
	require.NoError(t, err)
	require.NoError(t, m.SetResourceStatus(ctx, "child", "himeno", memory.ResourceAvailable))
	e, _, err := m.CoreGet(ctx, "child", "RESOURCE_INDEX")
	require.NoError(t, err)
	var got memory.ResourceIndex
	require.NoError(t, json.Unmarshal([]byte(e.Value), &got))
	require.Equal(t, memory.ResourceAvailable, got.Items[2].FetchStatus)
	e, _, err = m.CoreGet(ctx, "root", "RESOURCE_INDEX")
	require.NoError(t, err)
	require.Contains(t, e.Value, `"fetch_status":"pending"`, "the child's fetch is its own")
	require.ErrorIs(t, m.SetResourceStatus(ctx, "child", "nope", memory.ResourceFailed), memory.ErrInvalid)
	require.ErrorIs(t, m.SetResourceStatus(ctx, "child", "himeno", "done"), memory.ErrInvalid)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("- name: x\n  class: c\n  colour: red\n  path: p\n"), 0o644))
	_, err = memory.LoadResources(bad, dir)
	require.ErrorContains(t, err, "colour")
	require.NoError(t, os.WriteFile(bad, []byte("- name: x\n  class: c\n"), 0o644))
	_, err = memory.LoadResources(bad, dir)
	require.ErrorIs(t, err, memory.ErrInvalid)
}
