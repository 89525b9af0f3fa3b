// Package artifacts brings the files of task attempts home: workers upload
// each attempt's phase logs, declared outputs and plots to the JetStream
// object store (queue.ArtifactsBucket) within per-file and per-node caps,
// list them with their SHA-256 in the result, and the scheduler fetches them
// into the run directory (nodes/<id>/logs, nodes/<id>/outputs), checking
// every digest. Local and cluster mode use the same path: no shared file
// system is assumed.
package artifacts
