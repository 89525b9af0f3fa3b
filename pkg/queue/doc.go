// Package queue is hpcq's task queue on NATS JetStream: the versioned
// messages, the streams, publishing with deduplication, the pull consumer
// each pool's workers share, dead letters and the worker registry. It is
// the client only: the server that local mode runs in the process is
// package [github.com/hpcq/hpcq/pkg/queue/embedded].
//
// # Streams and subjects
//
//	HPCQ_TASKS      hpcq.tasks.<pool>.<run>  work queue, file storage
//	HPCQ_RESULTS    hpcq.results.<run>       limits retention, file storage
//	HPCQ_DLQ        hpcq.dlq.<pool>          limits retention, file storage
//	HPCQ_WORKERS    key-value bucket         one entry per worker, heartbeated
//	HPCQ_ARTIFACTS  object store             logs, outputs, plots of node attempts
//
// [New] creates or updates all of them; every process may call it at start.
//
// # Messages
//
// [schema.NodeTask] and [schema.NodeResult] carry "v": 1. [schema.DecodeTask] and
// [schema.DecodeResult] reject unknown versions ([schema.ErrUnknownVersion]), unknown
// fields, and invalid content ([schema.ErrInvalidMessage]) with a message that
// names the field. Both are published with Nats-Msg-Id
// "<run_id>/<node_id>/<attempt>", so a republish within the dedup window
// is dropped by the server.
//
// Results that end while an earlier publish of the same run is in flight
// (a worker running many short tasks) travel as one message: header
// Hpcq-Batch with their count, one result per line, Nats-Msg-Id a digest
// of their ids. A worker batches only the results of tasks whose publisher
// reads batches (every task this build publishes carries
// Hpcq-Reads-Batches: 1); older builds on either side keep getting single
// results. The results watch delivers each (node, attempt) once whichever
// way it came, and every valid line of a batch with a bad line or count.
//
// # Delivery
//
// [Queue.PoolConsumer] returns the durable consumer of a pool.
// [PoolConsumer.Fetch] hands out valid tasks as [Delivery] values; a
// delivery ends with Ack (after the result is stored), Nak, NakWithDelay,
// or DeadLetter, and is kept alive with InProgress. Messages that do not
// decode, and deliveries past Options.MaxDeliver, never reach the caller:
// they are copied to hpcq.dlq.<pool> with the reason and the delivery
// count, and terminated.
//
// The consumer's server-side MaxDeliver is unlimited on purpose: a message
// that reaches the server's limit stays in a work-queue stream forever,
// invisible to every consumer. The limit is enforced by the receiving side
// instead, so whichever worker dies when, nothing stays stuck.
//
// # Registry
//
// [Queue.RegisterWorker] writes a [WorkerInfo] and refreshes it every
// Options.HeartbeatPeriod; [Queue.Workers] reports an entry older than
// three of its heartbeat periods as lost. [Queue.Stats] gives per pool the
// pending, in-flight and dead-lettered counts and the workers.
package queue
