package stores

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/memory"
	"github.com/hpcq/hpcq/pkg/memory/cluster"
	"github.com/hpcq/hpcq/pkg/memory/sqlite"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// MovedKey in run.json's "memory" says when the memory was moved out of
// Redis into the run directory (MoveMemoryHome).
const MovedKey = "moved_from_redis"

// InRedis says whether a run whose run.json says where (its "memory")
// keeps its memory in Redis, or did before a move whose removal of the
// keys may not have ended: what MoveMemoryHome acts on.
func InRedis(where map[string]string) bool {
	return where["store"] == MemoryCluster || where[MovedKey] != ""
}

// Moved is what MoveMemoryHome moved: the counts of memory.Rows, the file
// that now holds them and the Redis keys removed.
type Moved struct {
	File                                                 string
	Branches, Core, Recall, Summaries, Archival, Repeats int
	Keys                                                 int
}

// MoveMemoryHome moves the memory of the ended cluster run in dir out of
// Redis into the run directory's SQLite file, so that Redis no longer
// keeps it: every write is copied with its seq (cluster.Store.Rows,
// sqlite.Import), every branch's core, summary and recall events and an
// archival search are read from both stores and compared (a difference
// stops the move, Redis untouched), run.json's "memory" is pointed at the
// file, and only then are the run's Redis keys removed (cluster.RemoveRun;
// its ClickHouse rows stay, for SQL). The dashboard, `scheduler export` and a local
// resume then read the file. Run again after an interruption, it goes on
// where it stopped. The caller makes sure the run has ended.
func MoveMemoryHome(ctx context.Context, s config.Store, dir rundir.Dir, log *slog.Logger) (Moved, error) {
	info, err := dir.ReadInfo()
	if err != nil {
		return Moved{}, err
	}
	file := dir.Path(rundir.MemoryDB)
	mv := Moved{File: file}
	switch info.Memory["store"] {
	case MemoryCluster:
	case MemorySQLite:
		if info.Memory[MovedKey] == "" {
			return mv, fmt.Errorf("run %s keeps its memory in its run directory (%s): nothing to move", dir.ID(), MemoryFile(dir, info.Memory))
		}
		// Moved before, and interrupted before Redis was emptied: empty it.
		mv.Keys, err = purgeRedis(ctx, s, dir, halfLifeOf(info.Memory), file, log)
		return mv, err
	default:
		return mv, fmt.Errorf("run %s kept no memory", dir.ID())
	}
	if err := needClusterServers(s, dir); err != nil {
		return mv, err
	}
	halfLife := halfLifeOf(info.Memory)
	cs, err := openClusterStore(ctx, s, dir, halfLife, log)
	if err != nil {
		return mv, err
	}
	defer cs.Close()
	rows, err := cs.Rows(ctx)
	if err != nil {
		return mv, err
	}
	mv.Branches, mv.Core, mv.Recall, mv.Summaries, mv.Archival, mv.Repeats =
		len(rows.Branches), len(rows.Core), len(rows.Recall), len(rows.Summaries), len(rows.Archival), len(rows.Hits)
	// A file left by an interrupted move (run.json still names Redis) is
	// this run's own copy: written again.
	if _, err := os.Stat(file); err == nil {
		log.Warn("a copy of the run's memory left by an interrupted move is written again", "file", file)
		if err := sqlite.Remove(file); err != nil {
			return mv, err
		}
	}
	if err := os.MkdirAll(dir.Path(rundir.MemoryDir), 0o755); err != nil {
		return mv, err
	}
	if err := sqlite.Import(file, sqlite.Options{Run: dir.ID(), HalfLife: halfLife}, rows); err != nil {
		return mv, err
	}
	// Only the branches and a query are needed from here: the rest of the
	// rows can be collected before the copy is loaded to be read.
	branches, query := rows.Branches, mostRepeated(rows)
	if err := sameReads(ctx, cs, file, dir.ID(), halfLife, branches, query); err != nil {
		_ = sqlite.Remove(file)
		return mv, fmt.Errorf("the copy of run %s's memory reads differently (%w); Redis keeps the memory", dir.ID(), err)
	}
	info.Memory = map[string]string{"enabled": "true", "store": MemorySQLite, "file": rundir.MemoryDB,
		"half_life": info.Memory["half_life"], MovedKey: time.Now().UTC().Format(time.RFC3339)}
	if err := dir.WriteInfo(info); err != nil {
		return mv, err
	}
	// Every write of this store is in Redis (Rows waited for them); Close
	// ships what ClickHouse has not got yet.
	if err := cs.Close(); err != nil {
		return mv, err
	}
	mv.Keys, err = cluster.RemoveRun(ctx, clusterOptions(s, dir, halfLife, log), "moved to "+file)
	return mv, err
}

// mostRepeated is the archival text with the most repeats ("" without
// any text).
func mostRepeated(rows memory.Rows) string {
	if len(rows.Archival) == 0 {
		return ""
	}
	repeats := map[int64]int{}
	for _, h := range rows.Hits {
		repeats[h.Target]++
	}
	best := rows.Archival[0]
	for _, it := range rows.Archival {
		if repeats[it.Seq] > repeats[best.Seq] {
			best = it
		}
	}
	return best.Text
}

// sameReads compares what every branch reads in the cluster store and in
// the SQLite copy at file: its core entries, summary and recall events,
// and an archival search for query (texts, tags and repeat counts seen
// from the branch; none when query is "").
func sameReads(ctx context.Context, cs *cluster.Store, file, run string, halfLife time.Duration, branches []memory.Branch, query string) error {
	copied, err := sqlite.Open(file, sqlite.Options{Run: run, HalfLife: halfLife, ReadOnly: true})
	if err != nil {
		return err
	}
	defer copied.Close()
	found := func(st memory.Store, branch string) ([]string, error) {
		hits, err := st.ArchivalSearch(ctx, memory.ArchivalSearchParams{Branch: branch, Query: query, K: 8})
		out := make([]string, len(hits))
		for i, h := range hits {
			out[i] = fmt.Sprintf("%q %v x%d", h.Text, h.Tags, h.Count)
		}
		return out, err
	}
	for _, b := range branches {
		p := memory.ViewParams{Branch: b.ID, Core: true}
		want, err := memory.ReadView(ctx, cs, p)
		if err != nil {
			return err
		}
		got, err := memory.ReadView(ctx, copied, p)
		if err != nil {
			return err
		}
		if d := viewDiff(want, got); d != "" {
			return fmt.Errorf("branch %s: %s", b.ID, d)
		}
		if query == "" {
			continue
		}
		wantHits, err := found(cs, b.ID)
		if err != nil {
			return err
		}
		gotHits, err := found(copied, b.ID)
		if err != nil {
			return err
		}
		if !slices.Equal(wantHits, gotHits) {
			return fmt.Errorf("branch %s: archival search %v in Redis, %v in the copy", b.ID, wantHits, gotHits)
		}
	}
	return nil
}

// viewDiff says how the view in the copy differs from the one in Redis
// ("" when it does not; no entries and nil are the same).
func viewDiff(redis, copied memory.View) string {
	if redis.Summary != copied.Summary {
		return fmt.Sprintf("summary %+v in Redis, %+v in the copy", redis.Summary, copied.Summary)
	}
	if d := sliceDiff("core entry", redis.Core, copied.Core); d != "" {
		return d
	}
	return sliceDiff("recall event", redis.Events, copied.Events)
}

func sliceDiff[T any](what string, redis, copied []T) string {
	for i := range max(len(redis), len(copied)) {
		switch {
		case i >= len(redis) || i >= len(copied):
			return fmt.Sprintf("%d %ss in Redis, %d in the copy", len(redis), what, len(copied))
		case !reflect.DeepEqual(redis[i], copied[i]):
			return fmt.Sprintf("%s %d: %+v in Redis, %+v in the copy", what, i, redis[i], copied[i])
		}
	}
	return ""
}

// purgeRedis removes what Redis keeps of a run whose memory was moved
// (a move interrupted before or while its keys were removed).
func purgeRedis(ctx context.Context, s config.Store, dir rundir.Dir, halfLife time.Duration, file string, log *slog.Logger) (int, error) {
	if s.RedisURL == "" {
		return 0, fmt.Errorf("run %s's memory was moved to %s; to remove what Redis keeps of it, set HPCQ_REDIS_URL", dir.ID(), file)
	}
	return cluster.RemoveRun(ctx, clusterOptions(s, dir, halfLife, log), "moved to "+file)
}
