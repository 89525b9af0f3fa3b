package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Fetch statuses of a resource.
const (
	ResourcePending   = "pending"
	ResourceAvailable = "available"
	ResourceFailed    = "failed"
)

// Resource is one entry of resources.yaml / resources.json.
type Resource struct {
	Name    string `json:"name" yaml:"name"`
	Class   string `json:"class" yaml:"class"`
	Path    string `json:"path,omitempty" yaml:"path"`
	URL     string `json:"url,omitempty" yaml:"url"`
	Summary string `json:"summary,omitempty" yaml:"summary"`
}

// ResourceItem is a resource as the index records it.
type ResourceItem struct {
	Resource
	FetchStatus    string `json:"fetch_status"`
	TreeSummary    string `json:"tree_summary,omitempty"`
	ContentExcerpt string `json:"content_excerpt,omitempty"`
}

// ResourceIndex is the RESOURCE_INDEX core entry.
type ResourceIndex struct {
	// Digest is sha256 of the normalized resource list; ResourceFileSHA of
	// the file as read.
	Digest          string         `json:"digest"`
	ResourceFileSHA string         `json:"resource_file_sha"`
	Items           []ResourceItem `json:"items"`
}

const (
	excerptBytes = 500
	treeEntries  = 20
)

// LoadResources reads resources.yaml or resources.json: a list of
// resources, or an object with a "resources" list. Relative paths are
// resolved against baseDir; a local path that exists is "available", one
// that does not, or a URL, is "pending" until Phase 1 fetches it.
func LoadResources(path, baseDir string) (ResourceIndex, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return ResourceIndex{}, fmt.Errorf("resources: %w", err)
	}
	var list []Resource
	var wrapped struct {
		Resources []Resource `json:"resources" yaml:"resources"`
	}
	target := any(&wrapped)
	if startsWithList(data) {
		target = &list
	}
	if strings.HasSuffix(path, ".json") {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		err = dec.Decode(target)
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		err = dec.Decode(target)
	}
	if err != nil {
		return ResourceIndex{}, fmt.Errorf("resources %s: %w", path, err)
	}
	if target == any(&wrapped) {
		list = wrapped.Resources
	}
	seen := map[string]bool{}
	for i, r := range list {
		switch {
		case strings.TrimSpace(r.Name) == "":
			return ResourceIndex{}, fmt.Errorf("%w: resources %s: item %d: name is required", ErrInvalid, path, i)
		case seen[r.Name]:
			return ResourceIndex{}, fmt.Errorf("%w: resources %s: name %q appears twice", ErrInvalid, path, r.Name)
		case r.Path == "" && r.URL == "":
			return ResourceIndex{}, fmt.Errorf("%w: resources %s: %s: needs a path or a url", ErrInvalid, path, r.Name)
		}
		seen[r.Name] = true
		if list[i].Class == "" {
			list[i].Class = "resource"
		}
	}
	fileSHA := sha256.Sum256(data)
	norm, _ := json.Marshal(list)
	digest := sha256.Sum256(norm)
	idx := ResourceIndex{Digest: "sha256:" + hex.EncodeToString(digest[:]), ResourceFileSHA: hex.EncodeToString(fileSHA[:]), Items: []ResourceItem{}}
	for _, r := range list {
		it := ResourceItem{Resource: r, FetchStatus: ResourcePending}
		if r.Path != "" {
			p := r.Path
			if !filepath.IsAbs(p) {
				p = filepath.Join(baseDir, p)
			}
			if fi, err := os.Stat(p); err == nil {
				it.FetchStatus = ResourceAvailable
				if fi.IsDir() {
					it.TreeSummary = treeSummary(p)
				} else {
					it.ContentExcerpt = excerpt(p)
				}
			}
		}
		idx.Items = append(idx.Items, it)
	}
	return idx, nil
}

// startsWithList: the document is a list (JSON '[' or a YAML "- " item),
// not an object with a "resources" key.
func startsWithList(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "#") || l == "---" {
			continue
		}
		return strings.HasPrefix(l, "[") || strings.HasPrefix(l, "- ") || l == "-"
	}
	return false
}

func treeSummary(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	names := make([]string, 0, min(len(entries), treeEntries))
	for i, e := range entries {
		if i == treeEntries {
			break
		}
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	s := fmt.Sprintf("%d entries: %s", len(entries), strings.Join(names, ", "))
	if len(entries) > treeEntries {
		s += ", ..."
	}
	return s
}

// excerpt is the start of a text file, or "" for binary content.
func excerpt(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, excerptBytes)
	n, _ := f.Read(buf)
	buf = buf[:n]
	for len(buf) > 0 && !utf8.Valid(buf) { // a rune cut at the end
		buf = buf[:len(buf)-1]
	}
	if bytes.IndexByte(buf, 0) >= 0 {
		return ""
	}
	return string(buf)
}

// IngestResources writes the index as the RESOURCE_INDEX core entry
// (importance 4) and one archival text per resource, tagged
// resource:<class>:<name> and resource_path:<path>.
func (m *Memory) IngestResources(ctx context.Context, branch string, idx ResourceIndex) error {
	data, err := json.Marshal(idx)
	if err != nil {
		return err
	}
	p := ApplyParams{Branch: branch, CoreSets: []CoreSetParams{{Key: "RESOURCE_INDEX", Value: m.redact(string(data)), Importance: 4}}}
	for _, it := range idx.Items {
		where := it.Path
		if where == "" {
			where = it.URL
		}
		text := fmt.Sprintf("resource %s (%s) at %s, %s", it.Name, it.Class, where, it.FetchStatus)
		for _, s := range []string{it.Summary, it.TreeSummary, it.ContentExcerpt} {
			if s != "" {
				text += ": " + s
			}
		}
		tags := []string{"resource:" + it.Class + ":" + it.Name}
		if it.Path != "" {
			tags = append(tags, "resource_path:"+it.Path)
		}
		p.Archival = append(p.Archival, ArchivalWriteParams{Text: m.redact(text), Tags: tags, Context: "resources"})
	}
	return m.store.Apply(ctx, p)
}

// SetResourceStatus records a resource's fetch status (after Phase 1) in
// the branch's RESOURCE_INDEX.
func (m *Memory) SetResourceStatus(ctx context.Context, branch, name, status string) error {
	switch status {
	case ResourcePending, ResourceAvailable, ResourceFailed:
	default:
		return fmt.Errorf("%w: resource status %q (pending, available or failed)", ErrInvalid, status)
	}
	e, ok, err := m.store.CoreGet(ctx, CoreKeyParams{Branch: branch, Key: "RESOURCE_INDEX"})
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: branch %s has no RESOURCE_INDEX", ErrInvalid, branch)
	}
	var idx ResourceIndex
	if err := json.Unmarshal([]byte(e.Value), &idx); err != nil {
		return fmt.Errorf("RESOURCE_INDEX of %s: %w", branch, err)
	}
	found := false
	for i := range idx.Items {
		if idx.Items[i].Name == name {
			idx.Items[i].FetchStatus, found = status, true
		}
	}
	if !found {
		return fmt.Errorf("%w: no resource %q in the index", ErrInvalid, name)
	}
	data, _ := json.Marshal(idx)
	_, err = m.store.CoreSet(ctx, CoreSetParams{Branch: branch, Key: "RESOURCE_INDEX", Value: string(data), Importance: 4})
	return err
}

// Resources is the RESOURCE_INDEX as branch sees it (ok false: the run
// has none).
func (m *Memory) Resources(ctx context.Context, branch string) (ResourceIndex, bool, error) {
	e, ok, err := m.store.CoreGet(ctx, CoreKeyParams{Branch: branch, Key: "RESOURCE_INDEX"})
	if err != nil || !ok {
		return ResourceIndex{}, false, err
	}
	var idx ResourceIndex
	if err := json.Unmarshal([]byte(e.Value), &idx); err != nil {
		return ResourceIndex{}, false, fmt.Errorf("RESOURCE_INDEX of %s: %w", branch, err)
	}
	return idx, true, nil
}

// Text is the index as the prompts' Resources section shows it: one line
// per resource with its fetch status.
func (idx ResourceIndex) Text() string {
	lines := make([]string, 0, len(idx.Items))
	for _, r := range idx.Items {
		where := r.Path
		if where == "" {
			where = r.URL
		}
		line := fmt.Sprintf("- %s (%s, %s): %s", r.Name, r.Class, r.FetchStatus, where)
		if r.Summary != "" {
			line += " - " + r.Summary
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// RefreshResources records what a node's Phase 1 (download) did to the
// resources (the seed's mem_resources_resolve_and_refresh): a resource
// that is not yet available and that the download commands name (by its
// URL, path or name) becomes available when the phase succeeded and
// failed when it did not. The change is the node's branch's own; its
// descendants see it, its siblings do not. It returns the resources
// changed.
func (m *Memory) RefreshResources(ctx context.Context, branch string, commands []string, ok bool) ([]string, error) {
	idx, found, err := m.Resources(ctx, branch)
	if err != nil || !found || len(commands) == 0 {
		return nil, err
	}
	cmds := strings.Join(commands, "\n")
	status := ResourceFailed
	if ok {
		status = ResourceAvailable
	}
	var changed []string
	for i, it := range idx.Items {
		if it.FetchStatus == ResourceAvailable || it.FetchStatus == status {
			continue
		}
		named := it.Name != "" && regexp.MustCompile(`(^|[^\w.-])`+regexp.QuoteMeta(it.Name)+`([^\w.-]|$)`).MatchString(cmds)
		for _, s := range []string{it.URL, it.Path} {
			if named || s != "" && strings.Contains(cmds, s) {
				idx.Items[i].FetchStatus = status
				changed = append(changed, it.Name+": "+status)
				break
			}
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	data, _ := json.Marshal(idx)
	if _, err := m.store.CoreSet(ctx, CoreSetParams{Branch: branch, Key: "RESOURCE_INDEX", Value: string(data), Importance: 4}); err != nil {
		return nil, err
	}
	return changed, nil
}
