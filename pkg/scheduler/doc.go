// Package scheduler owns runs on the scheduler side. For now it runs
// hand-written tasks: [LoadTasks] reads task files, [Exec] publishes the
// tasks and waits for each one's result or dead letter, and [StartLocal]
// puts an embedded NATS server and in-process workers in the same process,
// which is local mode.
package scheduler
