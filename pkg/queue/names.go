package queue

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Every NATS name hpcq uses: streams, subjects, consumers, key-value
// buckets. Nothing else in hpcq spells one.

// Streams and buckets, as DESIGN.md section 3 fixes them.
const (
	TasksStream   = "HPCQ_TASKS"
	ResultsStream = "HPCQ_RESULTS"
	DLQStream     = "HPCQ_DLQ"
	// WorkersBucket is the worker registry.
	WorkersBucket = "HPCQ_WORKERS"
	// HandBacksBucket counts, per task message, the deliveries a worker handed
	// back unrun (a walltime signal, a task that cannot fit in the remaining
	// walltime): they do not count against MaxDeliver.
	HandBacksBucket = "HPCQ_HANDBACKS"
	// BridgeBucket keeps each slurm-bridge's state: its jobs, per pool
	// status, resume requests; keys start with the bridge's name.
	BridgeBucket = "HPCQ_BRIDGE"
)

// Subjects.
const (
	taskPrefix   = "hpcq.tasks."
	resultPrefix = "hpcq.results."
	dlqPrefix    = "hpcq.dlq."

	// LLMSubject is where the scheduler's LLM gateway answers the workers'
	// requests, in the queue group LLMQueueGroup.
	LLMSubject    = "hpcq.llm.chat"
	LLMQueueGroup = "hpcq-llm-gateway"
)

// TaskSubject is the subject of a pool's tasks.
func TaskSubject(pool string) string { return taskPrefix + pool }

// ResultSubject is the subject of a run's results.
func ResultSubject(run string) string { return resultPrefix + run }

// DLQSubject is the dead-letter subject of a pool.
func DLQSubject(pool string) string { return dlqPrefix + pool }

// ConsumerName is the durable pull consumer shared by all workers of a pool.
func ConsumerName(pool string) string { return "pool_" + pool }

// BridgeState opens the slurm-bridges' state bucket; with create, it is
// made when missing (a bridge), else its absence is an error (a command
// that talks to a running bridge).
func (q *Queue) BridgeState(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	if create {
		kv, err := q.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: BridgeBucket, Description: "hpcq slurm-bridge state",
			History: 1, Storage: jetstream.FileStorage, Replicas: q.opts.Replicas})
		if err != nil {
			return nil, fmt.Errorf("queue: bucket %s: %w", BridgeBucket, err)
		}
		return kv, nil
	}
	kv, err := q.js.KeyValue(ctx, BridgeBucket)
	if err != nil {
		return nil, fmt.Errorf("queue: no bridge state on this server (bucket %s): %w", BridgeBucket, err)
	}
	return kv, nil
}
