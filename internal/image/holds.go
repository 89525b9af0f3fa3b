package image

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	now, err := installed(filepath.Join(upper, dpkgStatus))
	if err != nil {
		return nil
	}
	before := map[string]string{}
	for _, l := range lowers {
		if m, err := installed(filepath.Join(l, dpkgStatus)); err == nil {
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

// installed reads a dpkg status file: the packages whose Status is
// "install ok installed", with their versions. Only the three fields it
// needs are read, a line each (the format's continuation lines start with
// a space and are skipped); a library for Debian control files was not
// taken for this (pault.ag/go/debian links the deprecated x/crypto/openpgp).
func installed(path string) (map[string]string, error) {
	f, err := os.Open(path)
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
	sc := bufio.NewScanner(f)
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
	var out []string
	for _, pat := range []string{"usr/lib/python3*/*-packages/*.dist-info", "usr/local/lib/python3*/*-packages/*.dist-info",
		"root/.local/lib/python3*/site-packages/*.dist-info", "opt/*/lib/python3*/site-packages/*.dist-info"} {
		matches, _ := filepath.Glob(filepath.Join(upper, pat))
		for _, m := range matches {
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
