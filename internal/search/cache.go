package search

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/hpcq/hpcq/internal/journal"
	"github.com/hpcq/hpcq/pkg/schema"
)

// CacheKey is the content address of a node run: a hash of what decides its
// outcome (the files, the commands of every phase, expected outputs, metric
// patterns, limits, environment, requirements, pool) and of the
// toolchain fingerprint of the worker that runs it. Two nodes with the same
// key would run the same programs the same way: the second need not run.
// Ids, attempt, parent, stage and kind are not part of it.
func CacheKey(t *schema.NodeTask, toolchain map[string]string) string {
	type file struct{ Path, Mode, SHA string }
	files := make([]file, 0, len(t.Artifacts.Coding.Workspace.Files))
	for _, f := range t.Artifacts.Coding.Workspace.Files {
		sum := sha256.Sum256([]byte(f.Content))
		mode := f.Mode
		switch mode {
		case "", "644":
			mode = "0644"
		case "755":
			mode = "0755"
		}
		files = append(files, file{f.Path, string(mode), hex.EncodeToString(sum[:])})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	requires := append([]string(nil), t.Requires...)
	sort.Strings(requires)
	// encoding/json sorts map keys: env and toolchain are canonical.
	data, _ := json.Marshal(struct {
		Files     []file
		Download  []string
		Compile   []string
		Run       schema.RunPhase
		Limits    schema.Limits
		Env       map[string]string
		Requires  []string
		Pool      string
		Toolchain map[string]string
	}{files, t.Artifacts.Download.Commands, t.Artifacts.Compile.Commands, t.Artifacts.Run, t.Limits, t.Env, requires, t.Pool, toolchain})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Cache maps content addresses to results, kept in a journal file so that
// a resumed run remembers them.
type Cache struct {
	mu sync.Mutex
	m  map[string]schema.NodeResult
	jr *journal.Journal
}

type cacheRecord struct {
	Key    string            `json:"key"`
	Result schema.NodeResult `json:"result"`
}

// OpenCache opens (creating if needed) the cache at path.
func OpenCache(path string) (*Cache, error) {
	c := &Cache{m: map[string]schema.NodeResult{}}
	jr, err := journal.Open(path, journal.Options{}, func(p []byte) error {
		var r cacheRecord
		if err := json.Unmarshal(p, &r); err != nil {
			return fmt.Errorf("result cache record: %w", err)
		}
		c.m[r.Key] = r.Result
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.jr = jr
	return c, nil
}

// Get returns the result stored under key.
func (c *Cache) Get(key string) (schema.NodeResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[key]
	return r, ok
}

// Put stores a result. Only results of nodes that ran (not infrastructure
// failures) belong here: the caller decides.
func (c *Cache) Put(key string, r schema.NodeResult) error {
	data, err := json.Marshal(cacheRecord{key, r})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.jr.Append(data); err != nil {
		return err
	}
	c.m[key] = r
	return nil
}

// Len is the number of results.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Close closes the file.
func (c *Cache) Close() error { return c.jr.Close() }
