package bridge

import (
	"fmt"
	"slices"
	"strings"
)

// natsIdentity are the parts of HPCQ_NATS_<PART> that say who a NATS client
// is (the rest, such as the URL, the CA or the replicas, is the same for
// every role).
var natsIdentity = []string{"USER", "PASSWORD", "PASSWORD_FILE", "TOKEN", "TOKEN_FILE", "NKEY_FILE", "CREDS_FILE", "TLS_CERT", "TLS_KEY"}

const workerNATS = "HPCQ_WORKER_NATS_"

// JobEnv is the environment sbatch gets, and so the worker jobs (sbatch
// exports it): the bridge's own, except its NATS identity when
// HPCQ_WORKER_NATS_<PART> variables give the workers one of their own
// (HPCQ_WORKER_NATS_USER, HPCQ_WORKER_NATS_PASSWORD_FILE...): then the jobs
// get those as HPCQ_NATS_<PART> and none of the bridge's, so a bridge
// allowed to manage its bucket never lends its credentials to the workers.
// A HPCQ_WORKER_NATS_ variable that names no identity part is an error.
func JobEnv(environ []string) ([]string, error) {
	var worker []string
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		part, ok := strings.CutPrefix(name, workerNATS)
		if !ok {
			continue
		}
		if !slices.Contains(natsIdentity, part) {
			return nil, fmt.Errorf("%w: %s: not a NATS identity variable (%s<%s>)", ErrConfig, name, workerNATS, strings.Join(natsIdentity, "|"))
		}
		worker = append(worker, "HPCQ_NATS_"+part+"="+value)
	}
	if len(worker) == 0 {
		return environ, nil
	}
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		part, own := strings.CutPrefix(name, "HPCQ_NATS_")
		if strings.HasPrefix(name, workerNATS) || own && slices.Contains(natsIdentity, part) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, worker...), nil
}
