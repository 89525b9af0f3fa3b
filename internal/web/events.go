package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hpcq/hpcq/internal/tree"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// An event of a run's stream: a node whose line changed, or the run's
// summary.
type event struct {
	name string // node or run
	data []byte // JSON, redacted
}

// subscriberBuffer: a subscriber that falls this far behind is dropped;
// its browser reconnects and gets the whole state again.
const subscriberBuffer = 1024

// heartbeat keeps proxies and tunnels from closing an idle stream.
const heartbeat = 15 * time.Second

// watcher reads one run's directory every Poll while it has subscribers
// and sends them what changed.
type watcher struct {
	s     *Server
	ref   runRef
	subs  map[chan event]bool // under s.mu
	stop  context.CancelFunc
	ready chan struct{} // closed after the first read

	// raw, fp and reads are the loop's own: each node's view as last read
	// (before redaction), the run's files' fingerprint, the reads so far.
	raw   map[string][]byte
	fp    string
	reads int
	// still is, for a run that had ended at the last full read, the
	// fingerprint of its files then (withTreeJournal); "" otherwise.
	still string

	mu    sync.Mutex
	nodes map[string][]byte // the nodes and summary as last read, redacted
	sum   []byte
}

// subscribe adds a subscriber to the run's watcher, starting it; it
// returns the subscriber's channel, the run's state now, and the function
// that removes the subscriber (and stops the watcher after the last).
// Changes read after the state was taken come on the channel; one may
// come both ways, never neither.
func (s *Server) subscribe(ref runRef) (<-chan event, []event, func()) {
	run := ref.id
	s.mu.Lock()
	w := s.watchers[run]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &watcher{s: s, ref: ref, subs: map[chan event]bool{}, stop: cancel, ready: make(chan struct{}), nodes: map[string][]byte{}, raw: map[string][]byte{}}
		s.watchers[run] = w
		go w.loop(ctx)
	}
	ch := make(chan event, subscriberBuffer)
	w.subs[ch] = true
	s.mu.Unlock()
	<-w.ready
	return ch, w.state(), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.subs[ch] {
			delete(w.subs, ch)
			close(ch)
		}
		if len(w.subs) == 0 && s.watchers[run] == w {
			delete(s.watchers, run)
			w.stop()
		}
	}
}

// state is every node and the summary as last read.
func (w *watcher) state() []event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]event, 0, len(w.nodes)+1)
	for _, id := range slices.SortedFunc(maps.Keys(w.nodes), tree.CompareIDs) {
		out = append(out, event{"node", w.nodes[id]})
	}
	if w.sum != nil {
		out = append(out, event{"run", w.sum})
	}
	return out
}

func (w *watcher) loop(ctx context.Context) {
	w.read(ctx)
	close(w.ready)
	t := time.NewTicker(w.s.o.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed := w.read(ctx)
		if len(changed) == 0 {
			continue
		}
		w.s.mu.Lock()
		for ch := range w.subs {
			for _, ev := range changed {
				select {
				case ch <- ev:
					continue
				default: // too far behind: dropped, it reconnects
					delete(w.subs, ch)
					close(ch)
				}
				break
			}
		}
		w.s.mu.Unlock()
	}
}

// read reads the run and returns what changed since the last read. A read
// that fails leaves the last state as it was. Only the nodes whose view
// changed are redacted; the summary (which reads every node's outcome
// again) is read when a node changed, when one of the run's own files
// changed, and every summaryEvery reads (a scheduler killed without a
// trace).
func (w *watcher) read(ctx context.Context) []event {
	w.reads++
	if w.ref.archived() && w.reads%archiveEvery != 1 {
		return nil
	}
	// An ended run changes only when it is resumed, which grows its tree
	// journal or rewrites its own files: until then a poll is a few stats,
	// not a read of every node (a finished 10,000-node run cost 8-9% of a
	// core per browser watching it). Read whole every endedEvery polls all
	// the same, in case a file changed that the fingerprint does not see.
	// The fingerprints are taken before the read: a change after it is
	// seen at the next poll.
	fp, ended := runFiles(w.ref)
	still := ""
	if ended && w.ref.id != w.s.o.Live {
		still = withTreeJournal(w.ref, fp)
	}
	if w.still != "" && w.reads%endedEvery != 0 && still == w.still {
		return nil
	}
	views, err := w.s.views(ctx, w.ref)
	if err != nil {
		w.s.log.Warn("dashboard: run unreadable", "run", w.ref.id, "err", err)
		return nil
	}
	var changed []event
	for _, v := range views {
		raw, err := json.Marshal(v)
		if err != nil || bytes.Equal(w.raw[v.Node], raw) {
			continue
		}
		data, err := w.s.redact.json(v)
		if err != nil {
			continue
		}
		w.raw[v.Node] = raw
		changed = append(changed, event{"node", data})
	}
	var sum []byte
	if len(changed) > 0 || fp != w.fp || w.reads%summaryEvery == 0 || w.sum == nil {
		w.fp = fp
		if data, err := w.s.redact.json(w.s.summaryOf(ctx, w.ref)); err == nil && !bytes.Equal(data, w.sum) {
			sum = data
			changed = append(changed, event{"run", data})
		}
	}
	w.still = still
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range changed {
		if ev.name == "node" {
			var id struct{ Node string }
			if json.Unmarshal(ev.data, &id) == nil {
				w.nodes[id.Node] = ev.data
			}
		}
	}
	if sum != nil {
		w.sum = sum
	}
	return changed
}

// summaryEvery: the summary is read at least every this many reads;
// archiveEvery: an archived run (a database, not files) is read once every
// this many polls; endedEvery: an ended run whose files look unchanged is
// read whole once every this many polls.
const (
	summaryEvery = 5
	archiveEvery = 5
	endedEvery   = 30
)

// summaryOf is a run's summary, from its directory or the archive.
func (s *Server) summaryOf(ctx context.Context, ref runRef) RunSummary {
	if !ref.archived() {
		return s.summary(ref.dir)
	}
	sums, err := s.archiveSummaries(ctx, ref.id)
	if err == nil && len(sums) == 0 {
		err = errNoRun
	}
	if err != nil {
		return RunSummary{ID: ref.id, Source: SourceArchive, Error: "archive: " + err.Error()}
	}
	return sums[0]
}

// runFiles is a fingerprint of the files of the run itself that the
// summary reads besides the nodes: how it ended, its LLM usage, its
// server.json; and whether it has ended (its end.json).
func runFiles(ref runRef) (fp string, ended bool) {
	if ref.archived() {
		return "", false
	}
	var b strings.Builder
	d := rundir.Dir(ref.dir)
	for _, name := range []string{rundir.EndFile, rundir.UsageFile, rundir.ServerFile, rundir.InfoFile} {
		if fi, err := os.Stat(d.Path(name)); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", name, fi.Size(), fi.ModTime().UnixNano())
			ended = ended || name == rundir.EndFile
		}
	}
	return b.String(), ended
}

// withTreeJournal is fp, the run's own files' fingerprint, with its tree
// journal's: what a resume of an ended run changes first; "" when the
// journal is unreadable.
func withTreeJournal(ref runRef, fp string) string {
	fi, err := os.Stat(rundir.Dir(ref.dir).Path(rundir.TreeJournal))
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s%s %d %d;", fp, rundir.TreeJournal, fi.Size(), fi.ModTime().UnixNano())
}

// events streams a run's changes as server-sent events: on connecting,
// every node ("node" events) and the summary ("run"); then each node whose
// line changed and the summary when it changed, as the run goes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	ref, err := s.find(r.Context(), r.PathValue("run"))
	if err != nil {
		s.failRun(w, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, http.StatusInternalServerError, fmt.Errorf("streaming unsupported"))
		return
	}
	ch, initial, unsubscribe := s.subscribe(ref)
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	send := func(ev event) error {
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		return err
	}
	_, _ = fmt.Fprintf(w, "retry: 2000\n\n")
	for _, ev := range initial {
		if send(ev) != nil {
			return
		}
	}
	flusher.Flush()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case ev, ok := <-ch:
			if !ok {
				return // dropped: the browser reconnects
			}
			if send(ev) != nil {
				return
			}
		}
		flusher.Flush()
	}
}
