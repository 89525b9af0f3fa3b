package queue_test

import (
	"errors"
	"fmt"

	"github.com/hpcq/hpcq/pkg/queue"
)

func ExampleDecodeTask() {
	_, err := queue.DecodeTask([]byte(`{"v":2,"node_id":"n1"}`))
	fmt.Println(errors.Is(err, queue.ErrUnknownVersion), err)

	_, err = queue.DecodeTask([]byte(`{"v":1,"run_id":"r1","node_id":"n1","attempt":1,"artifacts":{"run":{"commands":["./a.out"]}}}`))
	fmt.Println(err)

	t, err := queue.DecodeTask([]byte(`{"v":1,"run_id":"r1","node_id":"n1","attempt":1,"pool":"gpu","artifacts":{"run":{"commands":["./a.out"]}}}`))
	fmt.Println(t.Subject(), t.MsgID(), err)
	// Output:
	// true invalid message: unknown version: v: 2 (this build reads version 1)
	// invalid message: pool: is required
	// hpcq.tasks.gpu r1/n1/1 <nil>
}
