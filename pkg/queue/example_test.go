package queue_test

import (
	"errors"
	"fmt"

	"github.com/hpcq/hpcq/pkg/queue"
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
