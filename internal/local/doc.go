// Package local is local mode: an embedded NATS server with JetStream on
// disk in the run directory and in-process workers running the phases
// executor, in the process of a `scheduler run --local` or `scheduler exec
// --local`. It is the cluster with the pieces moved together: the same
// queue, the same messages, the same worker code as a worker process, with
// the same task settings ([Params].Phases and .Worker, which
// internal/config's Tasks gives both).
package local
