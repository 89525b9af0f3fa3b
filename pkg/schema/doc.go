// Package schema is the message schema of hpcq, without any transport: the
// task a worker runs ([NodeTask]: artifacts of the phases, limits,
// requirements, the iterative install), the result it reports
// ([NodeResult]: phases, metrics, diagnostics, the error kind, the
// isolation), the node kinds of the tree search, the phase names and error
// kinds, and their validation.
//
// # Versions
//
// Every message carries "v": [Version]. [DecodeTask] and [DecodeResult]
// refuse unknown versions ([ErrUnknownVersion]), unknown fields, and
// invalid content ([ErrInvalidMessage]) with a message that names the
// field and the rule. Decoding is exact: member names match as written,
// and duplicate names and invalid UTF-8 are refused. [NodeTask.Validate] is what a task passes before it
// is published and before a worker writes a file.
//
// The NATS transport (subjects, streams, publishing, consumers, dead
// letters) is pkg/queue; the tree search (pkg/search) and the results
// tables (pkg/results) read these types without depending on it.
package schema
