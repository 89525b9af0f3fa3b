package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/hpcq/hpcq/pkg/schema"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Results are batched when many end at once: a worker running many short
// tasks publishes the results that end while an earlier publish of the same
// run is in flight as one message, so that the stream stores, confirms and
// delivers one message for all of them. A result that ends alone is
// published alone, in the single-result format, at once.
//
// Only a reader that reads batches gets them: every task this build
// publishes carries readsBatchesHeader, and a worker batches only the
// results of such tasks (a task published by an older build gets its result
// alone, which every build reads). A worker of an older build ignores the
// header and publishes single results, which this build reads.
const (
	// readsBatchesHeader on a task: its publisher reads batched results.
	readsBatchesHeader = "Hpcq-Reads-Batches"
	// batchHeader on a results message: it holds this many results, one
	// JSON object per line.
	batchHeader = "Hpcq-Batch"
)

// Bounds of one batch, and how many batches of one run a worker publishes
// at once before the results ending meanwhile wait for the next. Two in
// flight: one filling while the other is confirmed, and two slots ending
// together still publish at once, each alone. (Drain at 64 slots: 1 in
// flight 31k/s, 2 29-31k, 4 28-29k, 16 21-25k: the more in flight, the
// smaller each batch.)
const (
	maxBatchResults    = 256
	maxBatchBytes      = 512 << 10 // within the default max_payload (1 MiB); see batchBytes
	maxBatchesInFlight = 2
)

// resultBatch is a batch of results of one run being filled or published.
type resultBatch struct {
	run  string
	ids  []string
	data [][]byte
	size int

	done chan struct{} // closed when published (or failed): dup and err are set
	dup  bool
	err  error
}

// batcher groups the results of each run (see readsBatchesHeader).
type batcher struct {
	q    *Queue
	mu   sync.Mutex
	runs map[string]*runBatches
}

// runBatches is one run's open batch and its publishes in flight.
type runBatches struct {
	open     *resultBatch
	inflight int
}

// publishBatched publishes r with other results of its run ending at the
// same time, and returns once the message holding r is stored. The batch is
// published by the caller that opened it when fewer than
// maxBatchesInFlight of the run's batches are in flight; otherwise by the
// first of those to finish.
func (q *Queue) publishBatched(ctx context.Context, r *schema.NodeResult) (bool, error) {
	data, err := encodeResult(r)
	if err != nil {
		return false, err
	}
	limit := q.batchBytes()
	if len(data) > limit {
		return q.publishResult(ctx, r.RunID, r.MsgID(), data)
	}
	b := &q.batcher
	b.mu.Lock()
	st := b.runs[r.RunID]
	if st == nil {
		st = &runBatches{}
		b.runs[r.RunID] = st
	}
	if o := st.open; o != nil && (len(o.data) == maxBatchResults || o.size+len(data) > limit) {
		st.open = nil
		st.inflight++
		go b.send(o)
	}
	if st.open == nil {
		st.open = &resultBatch{run: r.RunID, done: make(chan struct{})}
	}
	mine := st.open
	mine.ids = append(mine.ids, r.MsgID())
	mine.data = append(mine.data, data)
	mine.size += len(data) + 1
	lead := st.inflight < maxBatchesInFlight
	if lead {
		st.open = nil
		st.inflight++
	}
	b.mu.Unlock()
	if lead {
		b.send(mine)
	}
	select {
	case <-mine.done:
		return mine.dup, mine.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// batchBytes bounds a batch's payload: maxBatchBytes, or less when the
// server allows less (a site may lower max_payload), leaving room for the
// headers. A result larger than that is published alone, as always.
func (q *Queue) batchBytes() int {
	return int(min(maxBatchBytes, q.nc.MaxPayload()-msgHeadroom))
}

// send publishes rb, then hands the run's open batch, if any, to a
// goroutine of its own (a caller that led a batch returns to its task).
func (b *batcher) send(rb *resultBatch) {
	rb.dup, rb.err = b.q.publishBatch(rb)
	close(rb.done)
	b.mu.Lock()
	st := b.runs[rb.run]
	st.inflight--
	next := st.open
	if next != nil {
		st.open = nil
		st.inflight++
	} else if st.inflight == 0 {
		delete(b.runs, rb.run)
	}
	b.mu.Unlock()
	if next != nil {
		go b.send(next)
	}
}

// publishBatch publishes one batch: a single result as it always was, more
// as one message with batchHeader and a Nats-Msg-Id made of its results'
// ids (a batch asked twice is stored once).
func (q *Queue) publishBatch(rb *resultBatch) (bool, error) {
	ctx := context.Background() // the batch is not any one caller's; patiently bounds it
	if len(rb.data) == 1 {
		return q.publishResult(ctx, rb.run, rb.ids[0], rb.data[0])
	}
	m := nats.NewMsg(ResultSubject(rb.run))
	m.Data = bytes.Join(rb.data, []byte{'\n'})
	m.Header.Set(batchHeader, strconv.Itoa(len(rb.data)))
	id := batchMsgID(rb.ids)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(jetstream.ExpectedStreamHeader, ResultsStream)
	ack, err := patiently(ctx, q.nc, func(ctx context.Context) (*jetstream.PubAck, error) {
		return q.js.PublishMsg(ctx, m)
	})
	if err != nil {
		return false, fmt.Errorf("queue: publish %d results (%s, ...): %w", len(rb.ids), rb.ids[0], err)
	}
	return ack.Duplicate, nil
}

// batchMsgID is the Nats-Msg-Id of a batch of results with these ids: a
// digest of them, so that two batches share an id only when they hold the
// same results. It cannot be a single result's id, which has slashes.
func batchMsgID(ids []string) string {
	h := sha256.New()
	var buf []byte
	for _, id := range ids {
		buf = strconv.AppendInt(buf[:0], int64(len(id)), 10) // length-prefixed: unambiguous
		buf = append(append(buf, ':'), id...)
		h.Write(buf)
	}
	return "batch-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// decodeResults reads a results message: one result, or a batch (hdr is
// the value of its batchHeader). Every line of a batch that is a valid
// result is returned, whatever the header's count says; each line that is
// not, and a count that is not the number of lines, gives an error.
func decodeResults(hdr string, data []byte) ([]*schema.NodeResult, []error) {
	if hdr == "" {
		r, err := schema.DecodeResult(data)
		if err != nil {
			return nil, []error{err}
		}
		return []*schema.NodeResult{r}, nil
	}
	want, werr := strconv.Atoi(hdr)
	var out []*schema.NodeResult
	var errs []error
	lines := 0
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		lines++
		r, err := schema.DecodeResult(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d of a batch of results: %w", lines, err))
			continue
		}
		out = append(out, r)
	}
	if werr != nil || want != lines {
		errs = append(errs, fmt.Errorf("%w: %s is %q, the message has %d lines", schema.ErrInvalidMessage, batchHeader, hdr, lines))
	}
	return out, errs
}
