package image

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/fileio"
)

// dpkgStatus is where dpkg records what is installed.
const dpkgStatus = "var/lib/dpkg/status"

// Holds says in a line what a layer (an overlay's upper directory) adds
// over what is below it (lowers, the nearest first, the image last): the
// Debian packages dpkg installed, the Python distributions, where other
// files went (but skip: what SealOptions.Skip leaves out). The prompts of
// the nodes that start from the layer say it, so that they do not install
// the same again. "" when it adds nothing of these.
func Holds(upper string, lowers, skip []string) string {
	var parts []string
	if pkgs := newPackages(upper, lowers); len(pkgs) > 0 {
		parts = append(parts, "Debian packages installed: "+list(pkgs, 30))
	}
	if py := pythonDists(upper); len(py) > 0 {
		parts = append(parts, "Python packages: "+list(py, 30))
	}
	if files := filesBy(upper, skipper(skip)); len(files) > 0 {
		parts = append(parts, "files under "+list(files, 8))
	}
	return strings.Join(parts, "; ")
}

func list(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}

// newPackages are the packages (name version) upper's dpkg status says
// are installed that the nearest status below does not.
func newPackages(upper string, lowers []string) []string {
	now, err := installed(upper)
	if err != nil {
		return nil
	}
	before := map[string]string{}
	for _, l := range lowers {
		if m, err := installed(l); err == nil {
			before = m
			break
		}
	}
	var out []string
	for name, v := range now {
		if before[name] != v {
			out = append(out, name+" "+v)
		}
	}
	sort.Strings(out)
	return out
}

// maxStatus bounds what is read of a dpkg status file (Debian's full
// archive installed is about 60 MB).
const maxStatus = 64 << 20

// installed reads the dpkg status file of the tree at dir: the packages
// whose Status is "install ok installed", with their versions. The tree is
// a task's or an image's: the file is opened inside it, only if it is a
// regular file, without following a link or blocking (a link to a host
// file the worker may read, a FIFO that would hold the slot), and read up
// to maxStatus. Only the three fields it needs are read, a line each (the
// format's continuation lines start with a space and are skipped); a
// library for Debian control files was not taken for this
// (pault.ag/go/debian links the deprecated x/crypto/openpgp).
func installed(dir string) (map[string]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, _, err := fileio.OpenRegular(root, dpkgStatus)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	var name, version, status string
	flush := func() {
		if name != "" && status == "install ok installed" {
			out[name] = version
		}
		name, version, status = "", "", ""
	}
	sc := bufio.NewScanner(io.LimitReader(f, maxStatus))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || line[0] == ' ' || line[0] == '\t' {
			continue
		}
		switch k {
		case "Package":
			name = strings.TrimSpace(v)
		case "Version":
			version = strings.TrimSpace(v)
		case "Status":
			status = strings.TrimSpace(v)
		}
	}
	flush()
	return out, sc.Err()
}

// pythonDists are the distributions (name version) whose .dist-info the
// layer holds, wherever a Python keeps them.
func pythonDists(upper string) []string {
	root, err := os.OpenRoot(upper)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []string
	for _, pat := range []string{"usr/lib/python3*/*-packages/*.dist-info", "usr/local/lib/python3*/*-packages/*.dist-info",
		"root/.local/lib/python3*/site-packages/*.dist-info", "opt/*/lib/python3*/site-packages/*.dist-info"} {
		for _, m := range globDirs(root, pat) {
			base := strings.TrimSuffix(filepath.Base(m), ".dist-info")
			if name, v, ok := strings.Cut(base, "-"); ok {
				base = name + " " + v
			}
			out = append(out, base)
		}
	}
	sort.Strings(out)
	return out
}

// globDirs are the directories under root that pattern (slashed, a
// path.Match pattern per name) names. Unlike filepath.Glob it descends only
// into directories, never through a link (one out of a task's tree) nor
// into anything an open could block on.
func globDirs(root *os.Root, pattern string) []string {
	cur := []string{"."}
	for _, part := range strings.Split(pattern, "/") {
		var next []string
		for _, dir := range cur {
			d, err := root.Open(dir)
			if err != nil {
				continue
			}
			ents, _ := d.ReadDir(-1)
			d.Close()
			for _, e := range ents {
				if ok, _ := path.Match(part, e.Name()); ok && e.Type().IsDir() {
					next = append(next, path.Join(dir, e.Name()))
				}
			}
		}
		sort.Strings(next)
		cur = next
	}
	return cur
}

// filesBy counts the layer's regular files by the first two directories
// of their paths, outside what package managers keep for themselves;
// most first.
func filesBy(upper string, skipped func(string) bool) []string {
	counts := map[string]int{}
	_ = filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(upper, p)
		rel = filepath.ToSlash(rel)
		if skipped(rel) {
			return nil
		}
		for _, own := range []string{"var/", "usr/share/doc/", "usr/share/man/", "etc/"} {
			if strings.HasPrefix(rel, own) {
				return nil
			}
		}
		parts := strings.SplitN(rel, "/", 3)
		key := "/" + parts[0]
		if len(parts) == 3 {
			key += "/" + parts[1]
		}
		counts[key]++
		return nil
	})
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s (%d)", k, counts[k])
	}
	return out
}
