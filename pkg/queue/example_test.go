package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/hpcq/hpcq/pkg/queue"
	"github.com/hpcq/hpcq/pkg/queue/embedded"
	"github.com/hpcq/hpcq/pkg/schema"
)

func ExampleDecodeTask() {
	_, err := schema.DecodeTask([]byte(`{"v":2,"node_id":"n1"}`))
	fmt.Println(errors.Is(err, schema.ErrUnknownVersion), err)

	_, err = schema.DecodeTask([]byte(`{"v":1,"run_id":"r1","node_id":"n1","attempt":1,"artifacts":{"run":{"commands":["./a.out"]}}}`))
	fmt.Println(err)

	t, err := schema.DecodeTask([]byte(`{"v":1,"run_id":"r1","node_id":"n1","attempt":1,"pool":"gpu","artifacts":{"run":{"commands":["./a.out"]}}}`))
	fmt.Println(queue.TaskSubject(t.Pool, t.RunID), t.MsgID(), err)
	// Output:
	// true invalid message: unknown version: v: 2 (this build reads version 1)
	// invalid message: pool: is required
	// hpcq.tasks.gpu.r1 r1/n1/1 <nil>
}

// A queue on the embedded server (what local mode runs): tasks published
// to a pool wait there for a worker; publishing the same attempt again is
// a duplicate the server drops.
func ExampleQueue_PublishTask() {
	dir, _ := os.MkdirTemp("", "hpcq-queue-example-")
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Options{StoreDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, err := srv.Connect("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	ctx := context.Background()
	q, err := queue.New(ctx, nc, queue.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, node := range []string{"n0001", "n0002", "n0001"} {
		t := &schema.NodeTask{V: 1, RunID: "r1", NodeID: node, Attempt: 1, Pool: "cpu",
			Artifacts: schema.Artifacts{Run: schema.RunPhase{Commands: []string{"./stencil 4096"}}}}
		dup, err := q.PublishTask(ctx, t)
		fmt.Println(t.MsgID(), "duplicate:", dup, err)
	}
	stats, _ := q.Stats(ctx)
	for _, s := range stats {
		fmt.Printf("pool %s: %d pending, %d in flight, %d workers\n", s.Pool, s.Pending, s.InFlight, s.Workers)
	}
	// Output:
	// r1/n0001/1 duplicate: false <nil>
	// r1/n0002/1 duplicate: false <nil>
	// r1/n0001/1 duplicate: true <nil>
	// pool cpu: 2 pending, 0 in flight, 0 workers
}
