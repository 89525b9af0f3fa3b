package hostbound

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/pkg/schema"
)

// CacheFileEnv names the file a host's measured bandwidth is kept in
// (default: hostbound-<host>.json in the user's cache directory, hpcq/).
const CacheFileEnv = "HPCQ_HOST_BOUND_CACHE"

// cacheFor is how long a measured bandwidth is reused before the host is
// measured again (a new measurement keeps the higher of the two).
const cacheFor = 30 * 24 * time.Hour

// Probe is a host's bound: the peak at once, the bandwidth once measured
// (in a goroutine of its own; a worker waits for it before it takes a
// task, so that the probe is in no task's timings).
type Probe struct {
	mu       sync.Mutex
	b        *schema.HostBound
	measured chan struct{}
}

var (
	processOnce  sync.Once
	processProbe *Probe
)

// Start is the process's probe, started on its first call: local mode's
// workers share one. It reads the peak from the host; the bandwidth comes
// from the host's cache file, or is measured once and written there.
func Start(log *slog.Logger) *Probe {
	processOnce.Do(func() {
		host, _ := os.Hostname()
		processProbe = start(host, runtime.NumCPU(), cacheFile(host), log)
	})
	return processProbe
}

func start(host string, cpus int, cache string, log *slog.Logger) *Probe {
	p := &Probe{measured: make(chan struct{})}
	info, err := os.ReadFile("/proc/cpuinfo")
	var c CPU
	if err == nil {
		c, err = ParseCPUInfo(info, readMaxKHz())
	}
	if err != nil {
		log.Warn("no host bound: metrics are not checked against this host's peak", "err", err)
		close(p.measured)
		return p
	}
	p.b = Peak(host, cpus, c)
	if e, ok := readCache(cache, host, cpus, c.Model); ok {
		p.b.TriadGBs, p.b.TriadHow = e.TriadGBs, e.TriadHow
		close(p.measured)
		return p
	}
	go func() {
		defer close(p.measured)
		gbs, how := Triad(cpus, triadLen(), 5)
		p.mu.Lock()
		p.b.TriadGBs, p.b.TriadHow = gbs, how
		b := *p.b
		p.mu.Unlock()
		if err := writeCache(cache, b, c.Model); err != nil {
			log.Warn("host bandwidth not cached: it is measured again at the next start", "file", cache, "err", err)
		}
		log.Info("host bound", "peak_gflops", b.PeakGFLOPS, "peak", b.PeakHow, "triad_gbs", b.TriadGBs)
	}()
	return p
}

// Peak is the bound of cpus CPUs of c.
func Peak(host string, cpus int, c CPU) *schema.HostBound {
	fpc := c.FlopsPerCycle()
	fma := ""
	if c.FMA {
		fma = ", FMA"
	}
	return &schema.HostBound{Host: host, CPUs: cpus, ClockGHz: c.ClockGHz, FlopsPerCycle: fpc,
		PeakGFLOPS: float64(cpus) * c.ClockGHz * float64(fpc),
		PeakHow:    fmt.Sprintf("%d CPUs x %.2f GHz (%s) x %d FLOP/cycle (%s%s)", cpus, c.ClockGHz, c.ClockFrom, fpc, c.Arch, fma)}
}

// Current is the bound as known now (nil: the host could not be read);
// its bandwidth is 0 until measured.
func (p *Probe) Current() *schema.HostBound {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b == nil {
		return nil
	}
	b := *p.b
	return &b
}

// Measured is closed once the bandwidth is known (or cannot be).
func (p *Probe) Measured() <-chan struct{} { return p.measured }

// triadLen is the probe's array length: four times the last-level cache
// in doubles, within 2 to 8 Mi elements (48 to 192 MiB in all).
func triadLen() int {
	n := 2 << 20
	data, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index3/size")
	if err == nil {
		s := strings.TrimSpace(string(data))
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		if v, err := strconv.Atoi(s); err == nil {
			n = 4 * v * mult / 8
		}
	}
	return min(max(n, 2<<20), 8<<20)
}

type cacheEntry struct {
	Host     string    `json:"host"`
	CPUs     int       `json:"cpus"`
	Model    string    `json:"model"`
	TriadGBs float64   `json:"triad_gbs"`
	TriadHow string    `json:"triad_how"`
	Measured time.Time `json:"measured"`
}

func cacheFile(host string) string {
	if f := os.Getenv(CacheFileEnv); f != "" {
		return f
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "hpcq", "hostbound-"+filepath.Base(host)+".json")
}

// readCache is the cached measurement of this host, CPU count and model
// when recent enough.
func readCache(file, host string, cpus int, model string) (cacheEntry, bool) {
	var e cacheEntry
	if file == "" {
		return e, false
	}
	data, err := os.ReadFile(file)
	if err != nil || json.Unmarshal(data, &e) != nil {
		return e, false
	}
	ok := e.Host == host && e.CPUs == cpus && e.Model == model && e.TriadGBs > 0 && e.TriadGBs < 1e6 &&
		time.Since(e.Measured) < cacheFor
	return e, ok
}

// writeCache keeps b's bandwidth, or the one cached when higher (a
// measurement on a busy host is low; the bound is the best seen).
func writeCache(file string, b schema.HostBound, model string) error {
	if file == "" {
		return errors.New("no cache directory")
	}
	e := cacheEntry{Host: b.Host, CPUs: b.CPUs, Model: model, TriadGBs: b.TriadGBs, TriadHow: b.TriadHow, Measured: time.Now()}
	var old cacheEntry
	if data, err := os.ReadFile(file); err == nil && json.Unmarshal(data, &old) == nil &&
		old.Host == e.Host && old.CPUs == e.CPUs && old.Model == model && old.TriadGBs > e.TriadGBs && old.TriadGBs < 1e6 {
		e.TriadGBs, e.TriadHow = old.TriadGBs, old.TriadHow
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(file, data)
}
