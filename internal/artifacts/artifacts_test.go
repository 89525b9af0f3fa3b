package artifacts_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/artifacts"
	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/rundir"
	"github.com/hpcq/hpcq/pkg/schema"
)

func store(t *testing.T, kind string) jetstream.ObjectStore {
	q := testutil.StartNATS(t, kind).Queue(t, queue.Options{})
	st, err := q.Artifacts(context.Background())
	require.NoError(t, err)
	return st
}

func write(t *testing.T, dir, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, data, 0o644))
}

// TestRoundTrip: what a worker uploads lands in the run directory with the
// same bytes, within the caps, with a note of what was left out; a link
// out of the workspace uploads nothing from outside.
func TestRoundTrip(t *testing.T) {
	for _, kind := range testutil.ServerKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st := store(t, kind)
			logs, ws, runDir := t.TempDir(), t.TempDir(), t.TempDir()
			compile := bytes.Repeat([]byte("gcc -O3 -fopenmp stencil.c\n"), 50)
			write(t, logs, "compile.log", compile)
			write(t, logs, "run.log", bytes.Repeat([]byte("x"), 3000)) // over the per-file cap: cut
			write(t, ws, "out/result.csv", []byte("n,gflops\n1024,5.9\n"))
			write(t, ws, "big.png", bytes.Repeat([]byte{0x89}, 3000)) // over the per-file cap: left out
			write(t, ws, "plots/gflops.svg", []byte("<svg/>"))
			secret := t.TempDir()
			write(t, secret, "key.png", []byte("secret"))
			require.NoError(t, os.Symlink(secret, filepath.Join(ws, "escape")))

			task := &schema.NodeTask{RunID: "r1", NodeID: "n7", Attempt: 2}
			up := artifacts.Uploader{Store: st, Limits: artifacts.Limits{PerFile: 2500, PerNode: 1 << 20}}
			files := []artifacts.File{
				{Kind: schema.ArtifactLog, Name: "compile.log", Dir: logs, Rel: "compile.log"},
				{Kind: schema.ArtifactLog, Name: "run.log", Dir: logs, Rel: "run.log"},
				{Kind: schema.ArtifactOutput, Name: "out/result.csv", Dir: ws, Rel: "out/result.csv"},
				{Kind: schema.ArtifactPlot, Name: "big.png", Dir: ws, Rel: "big.png"},
				{Kind: schema.ArtifactPlot, Name: "plots/gflops.svg", Dir: ws, Rel: "plots/gflops.svg"},
				{Kind: schema.ArtifactPlot, Name: "escape/key.png", Dir: ws, Rel: "escape/key.png"},
				{Kind: schema.ArtifactOutput, Name: "missing.txt", Dir: ws, Rel: "missing.txt"},
			}
			arts, note, err := up.Upload(ctx, task, files)
			require.NoError(t, err)
			var names []string
			for _, a := range arts {
				names = append(names, rundir.ArtifactDir(a)+"/"+a.Name)
			}
			require.Equal(t, []string{"logs/compile.log", "logs/run.log", "outputs/out/result.csv", "outputs/plots/gflops.svg"}, names)
			require.Contains(t, note, "logs/run.log: 2.9 KiB, only its first 2.4 KiB kept")
			require.Contains(t, note, "outputs/big.png: 2.9 KiB, over the 2.4 KiB per-file cap")
			require.Contains(t, note, "outputs/escape/key.png")
			require.Contains(t, note, "outputs/missing.txt")

			res := &schema.NodeResult{V: schema.Version, RunID: "r1", NodeID: "n7", Attempt: 2, Worker: "w", Artifacts: arts}
			require.NoError(t, res.Validate())
			require.NoError(t, artifacts.Fetch(ctx, st, runDir, res))
			got, err := os.ReadFile(filepath.Join(runDir, "nodes/n7/logs/compile.log"))
			require.NoError(t, err)
			require.Equal(t, compile, got)
			got, err = os.ReadFile(filepath.Join(runDir, "nodes/n7/logs/run.log"))
			require.NoError(t, err)
			require.Len(t, got, 2500)
			got, err = os.ReadFile(filepath.Join(runDir, "nodes/n7/outputs/plots/gflops.svg"))
			require.NoError(t, err)
			require.Equal(t, "<svg/>", string(got))
			require.NoFileExists(t, filepath.Join(runDir, "nodes/n7/outputs/escape/key.png"))

			// Per-node cap: the second file does not fit.
			up.Limits = artifacts.Limits{PerFile: 1 << 20, PerNode: 3000}
			arts, note, err = up.Upload(ctx, &schema.NodeTask{RunID: "r1", NodeID: "n8", Attempt: 1}, files[:3])
			require.NoError(t, err)
			require.Len(t, arts, 2)
			require.Contains(t, note, "logs/run.log: 2.9 KiB, over the 2.9 KiB per-node cap")
		})
	}
}

// TestFetchNamesTheNode: a missing or corrupt object is an error naming the
// node and the file; the good files still arrive, a corrupt one is not left.
func TestFetchNamesTheNode(t *testing.T) {
	ctx := context.Background()
	st := store(t, "embedded")
	logs, runDir := t.TempDir(), t.TempDir()
	write(t, logs, "compile.log", []byte("compiled\n"))
	write(t, logs, "run.log", []byte("GFLOPS: 5.9\n"))
	task := &schema.NodeTask{RunID: "r2", NodeID: "n3", Attempt: 1}
	arts, note, err := (&artifacts.Uploader{Store: st}).Upload(ctx, task, []artifacts.File{
		{Kind: schema.ArtifactLog, Name: "compile.log", Dir: logs, Rel: "compile.log"},
		{Kind: schema.ArtifactLog, Name: "run.log", Dir: logs, Rel: "run.log"},
	})
	require.NoError(t, err)
	require.Empty(t, note)
	require.Len(t, arts, 2)

	// Another writer replaced run.log's object; the result's digest no longer matches.
	_, err = st.PutBytes(ctx, queue.ArtifactObject("r2", "n3", 1, "logs", "run.log"), []byte("GFLOPS: 99.9\n"))
	require.NoError(t, err)
	res := &schema.NodeResult{RunID: "r2", NodeID: "n3", Attempt: 1, Artifacts: append(arts,
		schema.Artifact{Kind: schema.ArtifactOutput, Name: "gone.csv", Bytes: 1, SHA256: strings.Repeat("0", 64)})}
	err = artifacts.Fetch(ctx, st, runDir, res)
	require.Error(t, err)
	require.ErrorIs(t, err, artifacts.ErrCorrupt)
	require.ErrorContains(t, err, "artifacts of node n3 (attempt 1): logs/run.log")
	require.ErrorContains(t, err, "artifacts of node n3 (attempt 1): outputs/gone.csv: not in the object store")
	require.True(t, errors.Is(err, jetstream.ErrObjectNotFound))
	require.FileExists(t, filepath.Join(runDir, "nodes/n3/logs/compile.log"))
	require.NoFileExists(t, filepath.Join(runDir, "nodes/n3/logs/run.log"))
	entries, err := os.ReadDir(filepath.Join(runDir, "nodes/n3/logs"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no partial file is left")

	n, err := artifacts.Purge(ctx, st, "r2")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = st.Get(ctx, queue.ArtifactObject("r2", "n3", 1, "logs", "compile.log"))
	require.ErrorIs(t, err, jetstream.ErrObjectNotFound)
}

// electionStore is the object store as a leader election can leave it:
// its first put times out (its acks were lost), its second is second's (a
// put that reports success over a broken object), from the third on it
// behaves.
type electionStore struct {
	jetstream.ObjectStore
	second func(ctx context.Context, meta jetstream.ObjectMeta, data []byte) (*jetstream.ObjectInfo, error)
	puts   int
}

func (s *electionStore) Put(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) (*jetstream.ObjectInfo, error) {
	s.puts++
	switch s.puts {
	case 1:
		_, _ = io.Copy(io.Discard, r)
		return nil, nats.ErrTimeout
	case 2:
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return s.second(ctx, meta, data)
	}
	return s.ObjectStore.Put(ctx, meta, r)
}

// TestPutCheckedAfterRetry: a put that succeeds after a failed try is
// checked; an object that is not what was put is put again, and what the
// scheduler fetches is the file.
func TestPutCheckedAfterRetry(t *testing.T) {
	ctx := context.Background()
	st := &electionStore{ObjectStore: store(t, "embedded")}
	// The stream holds the first try's half of the file under the name.
	st.second = func(ctx context.Context, meta jetstream.ObjectMeta, data []byte) (*jetstream.ObjectInfo, error) {
		if _, err := st.ObjectStore.PutBytes(ctx, meta.Name, data[:len(data)/2]); err != nil {
			return nil, err
		}
		return &jetstream.ObjectInfo{ObjectMeta: meta, Size: uint64(len(data))}, nil
	}
	logs, runDir := t.TempDir(), t.TempDir()
	log := bytes.Repeat([]byte("METRIC score=1\n"), 100)
	write(t, logs, "run.log", log)
	up := artifacts.Uploader{Store: st}
	task := &schema.NodeTask{RunID: "r1", NodeID: "n1", Attempt: 1}
	arts, note, err := up.Upload(ctx, task, []artifacts.File{{Kind: schema.ArtifactLog, Name: "run.log", Dir: logs, Rel: "run.log"}})
	require.NoError(t, err)
	require.Empty(t, note)
	require.Equal(t, 3, st.puts, "timed out, put but the store holds something else, put again")
	res := &schema.NodeResult{V: schema.Version, RunID: "r1", NodeID: "n1", Attempt: 1, Worker: "w", Artifacts: arts}
	require.NoError(t, artifacts.Fetch(ctx, st.ObjectStore, runDir, res))
	got, err := os.ReadFile(filepath.Join(runDir, "nodes/n1/logs/run.log"))
	require.NoError(t, err)
	require.Equal(t, log, got)
}

// stalledStore's first get is one a leader election cut: no answer.
type stalledStore struct {
	jetstream.ObjectStore
	gets int
}

func (s *stalledStore) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	s.gets++
	if s.gets == 1 {
		return nil, nats.ErrTimeout
	}
	return s.ObjectStore.Get(ctx, name, opts...)
}

// TestFetchAgainAfterAStall: a get the stream did not answer is made
// again; the file arrives.
func TestFetchAgainAfterAStall(t *testing.T) {
	ctx := context.Background()
	st := &stalledStore{ObjectStore: store(t, "embedded")}
	logs, runDir := t.TempDir(), t.TempDir()
	write(t, logs, "run.log", []byte("METRIC score=1\n"))
	task := &schema.NodeTask{RunID: "r1", NodeID: "n1", Attempt: 1}
	up := artifacts.Uploader{Store: st.ObjectStore}
	arts, _, err := up.Upload(ctx, task, []artifacts.File{{Kind: schema.ArtifactLog, Name: "run.log", Dir: logs, Rel: "run.log"}})
	require.NoError(t, err)
	res := &schema.NodeResult{V: schema.Version, RunID: "r1", NodeID: "n1", Attempt: 1, Worker: "w", Artifacts: arts}
	require.NoError(t, artifacts.Fetch(ctx, st, runDir, res))
	require.Equal(t, 2, st.gets)
	got, err := os.ReadFile(filepath.Join(runDir, "nodes/n1/logs/run.log"))
	require.NoError(t, err)
	require.Equal(t, "METRIC score=1\n", string(got))
}

// TestPutCheckedForItsChunks: an object whose metadata names chunks the
// stream does not hold is put again.
func TestPutCheckedForItsChunks(t *testing.T) {
	ctx := context.Background()
	q := testutil.StartNATS(t, "embedded").Queue(t, queue.Options{})
	obs, err := q.Artifacts(ctx)
	require.NoError(t, err)
	st := &electionStore{ObjectStore: obs}
	// The object is stored, then its chunks are lost: its metadata is right,
	// the stream holds none of what it names.
	st.second = func(ctx context.Context, meta jetstream.ObjectMeta, data []byte) (*jetstream.ObjectInfo, error) {
		info, err := obs.PutBytes(ctx, meta.Name, data)
		if err != nil {
			return nil, err
		}
		stream, err := q.JetStream().Stream(ctx, "OBJ_"+queue.ArtifactsBucket)
		if err != nil {
			return nil, err
		}
		return info, stream.Purge(ctx, jetstream.WithPurgeSubject("$O."+queue.ArtifactsBucket+".C."+info.NUID))
	}
	logs, runDir := t.TempDir(), t.TempDir()
	write(t, logs, "run.log", []byte("METRIC score=2\n"))
	up := artifacts.Uploader{Store: st, Chunks: q.ArtifactChunks}
	task := &schema.NodeTask{RunID: "r1", NodeID: "n2", Attempt: 1}
	arts, note, err := up.Upload(ctx, task, []artifacts.File{{Kind: schema.ArtifactLog, Name: "run.log", Dir: logs, Rel: "run.log"}})
	require.NoError(t, err)
	require.Empty(t, note)
	require.Equal(t, 3, st.puts, "timed out, put without its chunks, put again")
	res := &schema.NodeResult{V: schema.Version, RunID: "r1", NodeID: "n2", Attempt: 1, Worker: "w", Artifacts: arts}
	require.NoError(t, artifacts.Fetch(ctx, obs, runDir, res))
}
