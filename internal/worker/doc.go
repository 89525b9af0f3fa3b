// Package worker pulls tasks of its pools from the queue and runs them on
// a fixed number of slots through an [Executor].
//
// A worker fetches only as many tasks as it has free slots, so a task never
// waits in one worker's buffer while another worker is idle. Each running
// task is heartbeated (InProgress) every third of AckWait. When the
// executor returns, the slot is freed at once; the result is published,
// and the task acked only after the server confirmed the result. An
// executor error (the machine, not the task) hands the task back with a
// delay, or dead-letters it on its last allowed delivery.
//
// Cancelling the context of [Worker.Run] drains the worker: it stops
// pulling, its running tasks are stopped and handed back at once (Nak
// without delay) for another worker, it leaves the registry, and Run
// returns nil.
package worker
