package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// Cache answers a request it has seen whole before (model, messages,
// temperature, max tokens, JSON mode) with the reply stored then, instead
// of asking the model again: a CacheHit, which Metered counts at no cost
// and outside the budget. It caches a request whose reply is reproducible
// (temperature 0), or every request when All is set (llm.cache: true in
// run.yaml). Failed requests are not stored.
//
// Entries are files, <dir>/<key[:2]>/<key>.json, written whole (a
// temporary file renamed), so several processes can share a directory
// without a lock; a file that cannot be read, or holds another request,
// is not served (it is written again). The first of Dirs is the run's
// own; a hit in a later one (a directory shared between runs,
// HPCQ_LLM_CACHE) is copied into it, and a reply is written to all.
type Cache struct {
	Client Client
	Dirs   []string
	// All caches every request, not only those at temperature 0.
	All bool
	// Model is the model the client answers with when a request names
	// none: part of the key, so that a cache shared by runs of other
	// models never mixes their replies.
	Model  string
	Logger *slog.Logger
}

// cacheEntry is one stored exchange.
type cacheEntry struct {
	Key      string   `json:"key"`
	Model    string   `json:"model"`
	Request  Request  `json:"request"`
	Response Response `json:"response"`
}

// cacheable: the request's reply may be served again.
func (c *Cache) cacheable(req Request) bool {
	return c.All || (req.Temperature != nil && *req.Temperature == 0)
}

// cacheKey is the hash of the whole request as sent, with the model it goes
// to.
func (c *Cache) cacheKey(req Request) (key, model string) {
	model = req.Model
	if model == "" {
		model = c.Model
	}
	data, _ := json.Marshal(struct {
		Model string  `json:"model"`
		Req   Request `json:"request"`
	}{model, req})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), model
}

// Chat implements Client.
func (c *Cache) Chat(ctx context.Context, req Request) (Response, error) {
	if !c.cacheable(req) || len(c.Dirs) == 0 {
		return c.Client.Chat(ctx, req)
	}
	key, model := c.cacheKey(req)
	for i, dir := range c.Dirs {
		e, ok := c.read(dir, key, model, req)
		if !ok {
			continue
		}
		if i > 0 {
			c.write(c.Dirs[0], e)
		}
		resp := e.Response
		resp.CacheHit, resp.Latency = true, 0
		return resp, nil
	}
	resp, err := c.Client.Chat(ctx, req)
	if err != nil || resp.CacheHit {
		return resp, err
	}
	e := cacheEntry{Key: key, Model: model, Request: req, Response: resp}
	for _, dir := range c.Dirs {
		c.write(dir, e)
	}
	return resp, nil
}

func cachePath(dir, key string) string { return filepath.Join(dir, key[:2], key+".json") }

// read returns the entry of key in dir when it holds this very request.
func (c *Cache) read(dir, key, model string, req Request) (cacheEntry, bool) {
	data, err := os.ReadFile(cachePath(dir, key))
	if err != nil {
		if !os.IsNotExist(err) {
			c.warn("llm cache: entry not read", "dir", dir, "key", key, "err", err)
		}
		return cacheEntry{}, false
	}
	var e cacheEntry
	err = json.Unmarshal(data, &e)
	if err == nil && (e.Key != key || e.Model != model || !sameRequest(e.Request, req)) {
		err = fmt.Errorf("it holds another request")
	}
	if err != nil {
		c.warn("llm cache: entry unusable, asked again", "dir", dir, "key", key, "err", err)
		return cacheEntry{}, false
	}
	return e, true
}

// sameRequest: a and b are sent alike (labels such as Purpose aside).
func sameRequest(a, b Request) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// write stores e in dir; a failure only costs a later call.
func (c *Cache) write(dir string, e cacheEntry) {
	if err := writeEntry(dir, e); err != nil {
		c.warn("llm cache: entry not written", "dir", dir, "err", err)
	}
}

func writeEntry(dir string, e cacheEntry) error {
	p := cachePath(dir, e.Key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".entry-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("llm cache: %w", err)
	}
	return nil
}

func (c *Cache) warn(msg string, args ...any) {
	if c.Logger != nil {
		c.Logger.Warn(msg, args...)
	}
}
