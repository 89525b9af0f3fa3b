// Package dispatch is the scheduler's side of the queue: the [Dispatcher]
// publishes tasks and routes each result or dead letter to whoever waits
// for it (the engine of a tree search), and [Exec] runs hand-written tasks
// ([LoadTasks] reads task files) as a plain job queue, printing a table of
// their outcomes. Local mode, the same code with an embedded server and
// in-process workers, is internal/local.
package dispatch
