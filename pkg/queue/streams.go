package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Every NATS name hpcq uses (streams, subjects, consumers, key-value
// buckets) and what creates and opens them are in this file. Nothing else
// in hpcq spells one.

// Streams and buckets, as DESIGN.md section 3 fixes them.
const (
	TasksStream   = "HPCQ_TASKS"
	ResultsStream = "HPCQ_RESULTS"
	DLQStream     = "HPCQ_DLQ"
	// LogsStream keeps the live output of running tasks for a day
	// (scheduler logs --follow); the whole logs come home as artifacts.
	LogsStream = "HPCQ_LOGS"
	// WorkersBucket is the worker registry.
	WorkersBucket = "HPCQ_WORKERS"
	// HandBacksBucket counts, per task message, the deliveries a worker handed
	// back unrun (a walltime signal, a task that cannot fit in the remaining
	// walltime): they do not count against MaxDeliver.
	HandBacksBucket = "HPCQ_HANDBACKS"
	// BridgeBucket keeps each slurm-bridge's state: its jobs, per pool
	// status, resume requests; keys start with the bridge's name.
	BridgeBucket = "HPCQ_BRIDGE"
	// ArtifactsBucket is the object store of the files workers bring home
	// (phase logs, outputs, plots), named <run>/<node>/<attempt>/<dir>/<name>.
	ArtifactsBucket = "HPCQ_ARTIFACTS"
	// CancelBucket records canceled runs (key <run>) and nodes (key
	// <run>.<node>); workers and schedulers watch it.
	CancelBucket = "HPCQ_CANCELED"
	// LayersBucket is the object store of the layers nodes leave over
	// their container images (what Phase 1 installed), named by digest
	// (LayerObject): a child node run on another worker starts from its
	// parent's.
	LayersBucket = "HPCQ_LAYERS"
	// ImagesBucket is the object store of container images pushed with
	// `scheduler image push`, named by digest (ImageObject).
	ImagesBucket = "HPCQ_IMAGES"
)

// Subjects.
const (
	taskPrefix   = "hpcq.tasks."
	resultPrefix = "hpcq.results."
	dlqPrefix    = "hpcq.dlq."
	logPrefix    = "hpcq.logs."

	// LLMSubject is where the scheduler's LLM gateway answers the workers'
	// requests, in the queue group LLMQueueGroup.
	LLMSubject    = "hpcq.llm.chat"
	LLMQueueGroup = "hpcq-llm-gateway"
)

// TaskSubject is the subject of a run's tasks in a pool:
// hpcq.tasks.<pool>.<run>. The run in the subject lets a canceled run's
// queued tasks be removed from the work queue (PurgeRunTasks).
func TaskSubject(pool, run string) string { return taskPrefix + pool + "." + run }

// poolTasks is the subjects of a pool's tasks, of every run.
func poolTasks(pool string) string { return taskPrefix + pool + ".*" }

// runTasks is the subjects of a run's tasks, in every pool.
func runTasks(run string) string { return taskPrefix + "*." + run }

// ResultSubject is the subject of a run's results.
func ResultSubject(run string) string { return resultPrefix + run }

// LogSubject is where a task attempt's phase output is streamed while it
// runs: hpcq.logs.<run>.<attempt>.<phase>.<node> (the node last: its id may
// hold '.', which only adds tokens there).
func LogSubject(run, node string, attempt int, phase string) string {
	return logPrefix + run + "." + strconv.Itoa(attempt) + "." + phase + "." + node
}

// DLQSubject is the dead-letter subject of a pool.
func DLQSubject(pool string) string { return dlqPrefix + pool }

// ConsumerName is the durable pull consumer shared by all workers of a pool.
func ConsumerName(pool string) string { return "pool_" + pool }

// keyValue creates or updates a bucket of hpcq's (one value per key, file
// storage, the queue's replicas); ttl 0 keeps values until deleted.
func (q *Queue) keyValue(ctx context.Context, bucket, description string, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := use(ctx, q.opts, q.nc, func(ctx context.Context) (jetstream.KeyValue, error) { return q.js.KeyValue(ctx, bucket) }, func(ctx context.Context) (jetstream.KeyValue, error) {
		cfg := jetstream.KeyValueConfig{Bucket: bucket, Description: description,
			History: 1, TTL: ttl, Storage: jetstream.FileStorage, Replicas: q.opts.Replicas}
		return createFirst(ctx, cfg, q.js.CreateKeyValue, q.js.UpdateKeyValue)
	})
	if err != nil {
		return nil, fmt.Errorf("queue: bucket %s: %w", bucket, err)
	}
	return kv, nil
}

// cancels opens the cancel bucket, creating it the first time.
func (q *Queue) cancels(ctx context.Context) (jetstream.KeyValue, error) {
	q.cancelMu.Lock()
	defer q.cancelMu.Unlock()
	if q.cancelKV != nil {
		return q.cancelKV, nil
	}
	kv, err := q.keyValue(ctx, CancelBucket, "hpcq canceled runs and nodes", 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	q.cancelKV = kv
	return kv, nil
}

// BridgeState opens the slurm-bridges' state bucket; with create, it is
// made when missing (a bridge), else its absence is an error (a command
// that talks to a running bridge).
func (q *Queue) BridgeState(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	if create {
		return q.keyValue(ctx, BridgeBucket, "hpcq slurm-bridge state", 0)
	}
	kv, err := q.js.KeyValue(ctx, BridgeBucket)
	if err != nil {
		return nil, fmt.Errorf("queue: no bridge state on this server (bucket %s): %w", BridgeBucket, err)
	}
	return kv, nil
}

// ArtifactChunks is how many chunks the artifacts object store holds
// under nuid (an object's ObjectInfo.NUID): an object whose metadata
// names more than the stream holds cannot be read whole. It asks for the
// stream's info (a worker's user may), not for a consumer.
func (q *Queue) ArtifactChunks(ctx context.Context, nuid string) (uint64, error) {
	subject := "$O." + ArtifactsBucket + ".C." + nuid
	s, err := q.js.Stream(ctx, "OBJ_"+ArtifactsBucket)
	if err != nil {
		return 0, fmt.Errorf("queue: artifacts stream: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("queue: artifacts stream: %w", err)
	}
	return info.State.Subjects[subject], nil
}

// Artifacts opens the artifacts object store, creating it (or updating its
// retention) the first time a process asks.
func (q *Queue) Artifacts(ctx context.Context) (jetstream.ObjectStore, error) {
	q.artifactsMu.Lock()
	defer q.artifactsMu.Unlock()
	if q.artifacts != nil {
		return q.artifacts, nil
	}
	st, err := use(ctx, q.opts, q.nc, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return q.js.ObjectStore(ctx, ArtifactsBucket)
	}, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return createFirst(ctx, jetstream.ObjectStoreConfig{Bucket: ArtifactsBucket,
			Description: "hpcq artifacts: phase logs, outputs and plots of every node attempt",
			TTL:         q.opts.ArtifactsMaxAge, Storage: jetstream.FileStorage, Replicas: q.opts.Replicas},
			q.js.CreateObjectStore, q.js.UpdateObjectStore)
	})
	if err != nil {
		return nil, fmt.Errorf("queue: object store %s: %w", ArtifactsBucket, err)
	}
	q.artifacts = st
	return st, nil
}

// Layers is the object store of container layers (LayersBucket), made on
// first use, bounded to Options.LayersMaxBytes (a layer that does not fit
// is not stored; the node's result says so).
func (q *Queue) Layers(ctx context.Context) (jetstream.ObjectStore, error) {
	return q.objectStore(ctx, &q.layers, jetstream.ObjectStoreConfig{Bucket: LayersBucket,
		Description: "hpcq container layers: what nodes wrote over their images, by digest",
		TTL:         q.opts.ArtifactsMaxAge, MaxBytes: q.opts.LayersMaxBytes, Storage: jetstream.FileStorage, Replicas: q.opts.Replicas})
}

// Images is the object store of container images pushed for workers
// without a shared file system (ImagesBucket; `scheduler image push`),
// named by digest (ImageObject), kept until removed.
func (q *Queue) Images(ctx context.Context) (jetstream.ObjectStore, error) {
	return q.objectStore(ctx, &q.images, jetstream.ObjectStoreConfig{Bucket: ImagesBucket,
		Description: "hpcq container images (SIF, SquashFS, OCI archives), by digest",
		Storage:     jetstream.FileStorage, Replicas: q.opts.Replicas})
}

// objectStore opens the bucket of cfg (making it where this queue may)
// once, kept in *slot.
func (q *Queue) objectStore(ctx context.Context, slot *jetstream.ObjectStore, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	q.storesMu.Lock()
	defer q.storesMu.Unlock()
	if *slot != nil {
		return *slot, nil
	}
	st, err := use(ctx, q.opts, q.nc, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return q.js.ObjectStore(ctx, cfg.Bucket)
	}, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return createFirst(ctx, cfg, q.js.CreateObjectStore, q.js.UpdateObjectStore)
	})
	if err != nil {
		bound := ""
		if cfg.Bucket == LayersBucket {
			bound = "HPCQ_LAYERS_MAX_MB"
		}
		return nil, fmt.Errorf("queue: object store %s: %w", cfg.Bucket, noRoom(err, cfg.MaxBytes, bound))
	}
	*slot = st
	return st, nil
}

// ImageObject is the object name of a pushed image: its digest's hex.
func ImageObject(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// LayerObject is the object name of a layer: its digest's hex.
func LayerObject(digest string) string { return strings.TrimPrefix(digest, "sha256:") }

// ArtifactObject is the object name of an artifact of a node attempt.
func ArtifactObject(run, node string, attempt int, dir, name string) string {
	return run + "/" + node + "/" + strconv.Itoa(attempt) + "/" + dir + "/" + name
}

// Options configure the streams, consumers and timings of the queue. The
// zero value is valid: every field defaults as documented.
type Options struct {
	// AckWait is how long a delivered task may go without an ack or an
	// InProgress heartbeat before the server redelivers it. Defaults to 60s.
	AckWait time.Duration
	// MaxDeliver is how many times a task is delivered before it is moved to
	// the dead-letter subject. Defaults to 5.
	MaxDeliver int
	// DedupWindow is how long the server remembers Nats-Msg-Id values of
	// tasks and results. Defaults to 10m.
	DedupWindow time.Duration
	// ResultsMaxAge is how long results and dead letters are kept. Defaults
	// to 30 days.
	ResultsMaxAge time.Duration
	// ArtifactsMaxAge is how long the artifacts object store keeps a file
	// (the scheduler fetches them as results arrive; `scheduler purge`
	// deletes a run's at once). Defaults to 7 days.
	ArtifactsMaxAge time.Duration
	// Replicas of every stream and bucket (1 for a single server). Defaults to 1.
	Replicas int
	// LayersMaxBytes bounds the container layers' object store (kept as
	// long as artifacts). Defaults to 8 GiB.
	LayersMaxBytes int64
	// HeartbeatPeriod is how often workers refresh their registry entry; a
	// worker silent for 3 periods is reported lost. Defaults to 5s.
	HeartbeatPeriod time.Duration
	// UseExisting: streams, buckets and consumers that exist are used as
	// they are, and only missing ones are created. Workers and slurm-bridges
	// set it, so that their NATS users need no right to change a stream
	// (docs: deploy/slurm/README.md, "Credentials"); the scheduler, which
	// leaves it unset, creates or updates them to this build's settings.
	UseExisting bool
}

// ErrInvalidOption is wrapped by option validation errors.
var ErrInvalidOption = errors.New("invalid option")

func (o Options) withDefaults() Options {
	if o.AckWait == 0 {
		o.AckWait = 60 * time.Second
	}
	if o.MaxDeliver == 0 {
		o.MaxDeliver = 5
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = 10 * time.Minute
	}
	if o.ResultsMaxAge == 0 {
		o.ResultsMaxAge = 30 * 24 * time.Hour
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.ArtifactsMaxAge == 0 {
		o.ArtifactsMaxAge = 7 * 24 * time.Hour
	}
	if o.HeartbeatPeriod == 0 {
		o.HeartbeatPeriod = 5 * time.Second
	}
	if o.LayersMaxBytes == 0 {
		o.LayersMaxBytes = 8 << 30
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.AckWait < 100*time.Millisecond:
		return fmt.Errorf("%w: AckWait %v, must be >= 100ms", ErrInvalidOption, o.AckWait)
	case o.MaxDeliver < 1:
		return fmt.Errorf("%w: MaxDeliver %d, must be >= 1", ErrInvalidOption, o.MaxDeliver)
	case o.DedupWindow < time.Second:
		return fmt.Errorf("%w: DedupWindow %v, must be >= 1s", ErrInvalidOption, o.DedupWindow)
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("%w: Replicas %d, must be 1 to 5", ErrInvalidOption, o.Replicas)
	case o.HeartbeatPeriod < 10*time.Millisecond:
		return fmt.Errorf("%w: HeartbeatPeriod %v, must be >= 10ms", ErrInvalidOption, o.HeartbeatPeriod)
	}
	return nil
}

func streamConfigs(o Options) []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        TasksStream,
			Description: "hpcq node tasks, one subject per pool and run",
			Subjects:    []string{taskPrefix + "*.*"},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  o.DedupWindow,
			Replicas:    o.Replicas,
		},
		{
			Name:        ResultsStream,
			Description: "hpcq node results, one subject per run",
			Subjects:    []string{resultPrefix + "*"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  o.DedupWindow,
			MaxAge:      o.ResultsMaxAge,
			Replicas:    o.Replicas,
		},
		{
			Name:        LogsStream,
			Description: "hpcq live output of running tasks, per run, attempt, phase and node",
			Subjects:    []string{logPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      24 * time.Hour,
			MaxBytes:    1 << 30,
			Discard:     jetstream.DiscardOld,
			Replicas:    o.Replicas,
		},
		{
			Name:        DLQStream,
			Description: "hpcq dead-lettered tasks, one subject per pool",
			Subjects:    []string{dlqPrefix + "*"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  o.DedupWindow,
			MaxAge:      o.ResultsMaxAge,
			Replicas:    o.Replicas,
		},
	}
}

// consumerConfig is the durable pull consumer of a pool. MaxDeliver is left
// unlimited on the server on purpose: a message that reaches the server's
// limit stays in a work-queue stream forever, invisible to every consumer.
// Workers enforce Options.MaxDeliver themselves instead: the delivery past
// the limit is moved to the dead-letter subject and terminated, so nothing
// stays stuck whichever worker dies when.
func consumerConfig(pool string, o Options) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerName(pool),
		Description:   "hpcq workers of pool " + pool,
		FilterSubject: poolTasks(pool),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 100_000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
		Replicas:      o.Replicas,
	}
}

// declareAttempt bounds one request that creates or updates a stream,
// bucket or consumer. On a NATS cluster (2.9), when several processes
// declare the same replicated stream at once, the requests of all but one
// can go unanswered; a later request is answered (the stream exists by
// then), so declare asks again rather than wait out the whole deadline.
const declareAttempt = 4 * time.Second

// declareBudget bounds all of New's declarations together. Answered ones
// take milliseconds; the budget is for unanswered tries during races and
// elections (the multi-host test saw three processes need 23 s for the
// streams and buckets, one retry each). An error the server answers, such
// as "no suitable peers for placement", returns at once.
const declareBudget = time.Minute

// use returns what lookup finds when o.UseExisting, else (or when lookup
// finds nothing) what declare(create) makes.
func use[T any](ctx context.Context, o Options, nc *nats.Conn, lookup, create func(context.Context) (T, error)) (T, error) {
	if o.UseExisting {
		lctx, cancel := context.WithTimeout(ctx, declareAttempt)
		v, err := lookup(lctx)
		cancel()
		if err == nil {
			return v, nil
		}
	}
	return declare(ctx, nc, create)
}

// createFirst makes what cfg describes, and updates it only when the
// server says it exists with another configuration (a stream, a bucket or
// an object store of an earlier hpcq). It is nats.go's create-or-update
// the other way round, because every process declares at start, at once:
// nats-server 2.9.10 (Debian 12's) panics and exits on an update that
// arrives while another process's create of the same stream is under way
// (a nil pointer in updateWithAdvisory; three processes declaring on a
// fresh server crash it within a few tries), whereas a create the server
// finds identical to what it has is answered as it is, with no update.
//
// A create is also answered "insufficient storage" (10047) when what it
// names exists and the server's file store could not hold its bound a
// second time (the server checks the reservation before it looks): then
// the update, which reserves only a change of bound, is what it needs; a
// store that does not exist is not found by it, and the create's answer
// stands.
func createFirst[C, T any](ctx context.Context, cfg C, create, update func(context.Context, C) (T, error)) (T, error) {
	v, err := create(ctx, cfg)
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		return update(ctx, cfg)
	case errors.As(err, &api) && api.ErrorCode == 10047:
		if u, uerr := update(ctx, cfg); uerr == nil {
			return u, nil
		}
	}
	return v, err
}

// declare runs f (an idempotent create-or-update) until it succeeds, with
// a fresh deadline per attempt, until ctx ends; an error the server
// answered is returned at once, unless it says another process got there
// first (raced), and so is an attempt the server did not answer because
// nc's user may not make it (a permission violation).
func declare[T any](ctx context.Context, nc *nats.Conn, f func(context.Context) (T, error)) (T, error) {
	for {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, declareAttempt)
		v, err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || raced(err)) {
			return v, explain(nc, err, start)
		}
		if r := refused(nc, start); r != nil {
			// Not an election: the user may not do this. Asking again
			// would not help.
			return v, explain(nc, err, start)
		}
	}
}

// raced: the stream was created by another process between this one's
// look and its create (the create then overlaps it, or finds its name
// taken); asked again, it is found and updated.
func raced(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode {
	case 10058, // stream name already in use with a different configuration
		10065, // subjects overlap with an existing stream
		10049: // error creating store for stream: another process's create of it is under way (embedded server, TestStreamsDeclaredAtOnce)
		return true
	}
	return false
}

// noRoom explains a store the server has no room for (JetStream's
// 10047): a bounded stream's MaxBytes is reserved of the server's file
// store when it is made, and that store is by default 75% of the disk that
// was free where the server keeps it when it started, so a full disk
// refuses a bound it never fills. bound names the setting of maxBytes.
func noRoom(err error, maxBytes int64, bound string) error {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != 10047 {
		return err
	}
	remedy := "free disk where the server keeps its store (then restart it), or raise its jetstream max_file_store"
	if bound != "" {
		remedy += ", or lower " + bound
	}
	if maxBytes <= 0 {
		return fmt.Errorf("%w: the NATS server's JetStream file store is full: %s", err, remedy)
	}
	return fmt.Errorf("%w: the NATS server reserves this store's bound (%d MB) when it is made, and its JetStream file store "+
		"(max_file_store; by default 75%% of the disk free when the server started) has less left: %s", err, maxBytes>>20, remedy)
}

// ensureStreams creates or updates the streams and the worker and
// hand-back buckets, and returns the two buckets. It is idempotent and
// safe to call from every process at start, at once (see declare). The
// buckets are those declare answered with, not looked up again: a lookup
// left unanswered during a cluster's elections waited out the rest of
// New's budget (TestQueueDeclaredAtOnceOnACluster failed so once).
func ensureStreams(ctx context.Context, js jetstream.JetStream, o Options) (workers, handbacks jetstream.KeyValue, err error) {
	for _, cfg := range streamConfigs(o) {
		if _, err := use(ctx, o, js.Conn(), func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, cfg.Name) },
			func(ctx context.Context) (jetstream.Stream, error) {
				return createFirst(ctx, cfg, js.CreateStream, js.UpdateStream)
			}); err != nil {
			return nil, nil, fmt.Errorf("queue: create or update stream %s: %w", cfg.Name, noRoom(err, cfg.MaxBytes, ""))
		}
	}
	buckets := make([]jetstream.KeyValue, 0, 2)
	for _, kv := range []jetstream.KeyValueConfig{{
		Bucket:      WorkersBucket,
		Description: "hpcq worker registry",
		History:     1,
		// Live workers rewrite their entry every heartbeat; the entry of a
		// worker that died is reported lost, then dropped after a day.
		TTL:      24 * time.Hour,
		Storage:  jetstream.FileStorage,
		Replicas: o.Replicas,
	}, {
		Bucket:      HandBacksBucket,
		Description: "hpcq task hand-backs: deliveries that do not count against MaxDeliver",
		History:     1,
		TTL:         7 * 24 * time.Hour,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}} {
		b, err := use(ctx, o, js.Conn(), func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, kv.Bucket) },
			func(ctx context.Context) (jetstream.KeyValue, error) {
				return createFirst(ctx, kv, js.CreateKeyValue, js.UpdateKeyValue)
			})
		if err != nil {
			return nil, nil, fmt.Errorf("queue: create or update bucket %s: %w", kv.Bucket, err)
		}
		buckets = append(buckets, b)
	}
	return buckets[0], buckets[1], nil
}
