package executor

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
)

// TaskUser is whom a task's commands run as when its slot has a uid of
// its own (SandboxConfig.UIDs), with the group of the same number: no
// other task shares its files or its process count.
type TaskUser struct {
	UID, GID int
	// Nproc, when > 0, is the task's process limit as RLIMIT_NPROC (set
	// where no pids cgroup can be had).
	Nproc int
}

// maxUIDRange bounds HPCQ_SANDBOX_UIDS: a slot each, and a worker has
// far fewer slots.
const maxUIDRange = 65536

// parseUIDRange reads "FIRST-LAST" (inclusive); "" is no range.
func parseUIDRange(s string) (first, count int, err error) {
	if s = strings.TrimSpace(s); s == "" {
		return 0, 0, nil
	}
	lo, hi, ok := strings.Cut(s, "-")
	a, err1 := strconv.Atoi(strings.TrimSpace(lo))
	b, err2 := strconv.Atoi(strings.TrimSpace(hi))
	switch {
	case !ok || err1 != nil || err2 != nil:
		return 0, 0, fmt.Errorf("HPCQ_SANDBOX_UIDS=%q: want FIRST-LAST, e.g. 200000-200255", s)
	case a < 1000 || b < a || b > 1<<31-2:
		return 0, 0, fmt.Errorf("HPCQ_SANDBOX_UIDS=%q: want 1000 <= FIRST <= LAST < 2^31-1 (unprivileged ids no account uses)", s)
	case b-a+1 > maxUIDRange:
		return 0, 0, fmt.Errorf("HPCQ_SANDBOX_UIDS=%q: at most %d ids (one per slot)", s, maxUIDRange)
	case os.Geteuid() >= a && os.Geteuid() <= b:
		return 0, 0, fmt.Errorf("HPCQ_SANDBOX_UIDS=%q holds the worker's own uid %d", s, os.Geteuid())
	}
	return a, b - a + 1, nil
}

// slotUIDs hands each slot its uid, checked once not to be an account's.
type slotUIDs struct {
	first, count int
	checked      sync.Map // uid -> error (nil: free)
}

// forSlot is the user of slot i's tasks, or nil and why not (the sandbox
// user runs them then).
func (u *slotUIDs) forSlot(i int) (*TaskUser, string) {
	if u == nil || u.count == 0 {
		return nil, ""
	}
	if i < 0 || i >= u.count {
		return nil, fmt.Sprintf("slot %d has no uid of its own (HPCQ_SANDBOX_UIDS holds %d)", i, u.count)
	}
	uid := u.first + i
	v, ok := u.checked.Load(uid)
	if !ok {
		var err error
		if acct, lerr := user.LookupId(strconv.Itoa(uid)); lerr == nil {
			err = fmt.Errorf("uid %d of HPCQ_SANDBOX_UIDS is the account %q", uid, acct.Username)
		}
		v, _ = u.checked.LoadOrStore(uid, err)
	}
	if err, _ := v.(error); err != nil {
		return nil, err.Error()
	}
	return &TaskUser{UID: uid, GID: uid}, ""
}
