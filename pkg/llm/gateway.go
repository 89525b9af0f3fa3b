package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/hpcq/hpcq/pkg/queue"
)

// The gateway: the scheduler answers LLM requests on queue.LLMSubject over
// NATS, so that workers, which on clusters have no internet access, can ask
// a model; API keys exist only in the scheduler's process. Messages are
// versioned JSON:
//
//	request: {"v": 1, "request": Request, "purpose": "...", "node": "..."}
//	reply:   {"v": 1, "response": Response} or {"v": 1, "error": {"kind": "...", "message": "..."}}
//
// kind is bad_request, no_reply, budget, retries_exhausted, config, too_large or
// failed; the client maps the first five back to this package's errors.

// GatewayVersion is the message version this build reads and writes.
const GatewayVersion = 1

type gatewayRequest struct {
	V       int     `json:"v"`
	Request Request `json:"request"`
	Purpose string  `json:"purpose,omitempty"`
	Node    string  `json:"node,omitempty"`
}

type gatewayError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

type gatewayReply struct {
	V        int           `json:"v"`
	Response *Response     `json:"response,omitempty"`
	Error    *gatewayError `json:"error,omitempty"`
}

// ErrGateway: the gateway answered with an error, or not at all.
var ErrGateway = errors.New("llm gateway")

// decodeGatewayRequest reads a request strictly: one JSON object, known
// fields only, this version.
func decodeGatewayRequest(data []byte) (gatewayRequest, error) {
	var r gatewayRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%w: malformed request: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return r, fmt.Errorf("%w: malformed request: data after the JSON object", ErrBadRequest)
	}
	if r.V != GatewayVersion {
		return r, fmt.Errorf("%w: unknown version: v: %d (this build reads version %d)", ErrBadRequest, r.V, GatewayVersion)
	}
	r.Request.Purpose, r.Request.Node = r.Purpose, r.Node
	return r, r.Request.validate()
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, ErrBadRequest):
		return "bad_request"
	case errors.Is(err, ErrNoReply):
		return "no_reply"
	case errors.Is(err, ErrBudget):
		return "budget"
	case errors.Is(err, ErrRetriesExhausted):
		return "retries_exhausted"
	case errors.Is(err, ErrConfig):
		return "config"
	}
	return "failed"
}

var kindErrors = map[string]error{"bad_request": ErrBadRequest, "no_reply": ErrNoReply, "budget": ErrBudget, "retries_exhausted": ErrRetriesExhausted, "config": ErrConfig}

// Serve answers gateway requests with client until ctx ends, from a queue
// group, so several schedulers' gateways may share the load. Each request
// is answered in a goroutine of its own (the client bounds concurrency).
func Serve(ctx context.Context, nc *nats.Conn, client Client, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	sub, err := nc.QueueSubscribe(queue.LLMSubject, queue.LLMQueueGroup, func(m *nats.Msg) {
		go answer(ctx, nc, client, m, log)
	})
	if err != nil {
		return fmt.Errorf("llm gateway: subscribe: %w", err)
	}
	<-ctx.Done()
	return sub.Drain()
}

func answer(ctx context.Context, nc *nats.Conn, client Client, m *nats.Msg, log *slog.Logger) {
	reply := gatewayReply{V: GatewayVersion}
	req, err := decodeGatewayRequest(m.Data)
	if err == nil {
		var resp Response
		resp, err = client.Chat(ctx, req.Request)
		if err == nil {
			reply.Response = &resp
		}
	}
	if err != nil {
		reply.Error = &gatewayError{Kind: errorKind(err), Message: err.Error()}
	}
	data, merr := json.Marshal(reply)
	if merr == nil && int64(len(data)) > nc.MaxPayload() {
		size := len(data)
		reply = gatewayReply{V: GatewayVersion, Error: &gatewayError{Kind: "too_large",
			Message: fmt.Sprintf("the reply has %d bytes, more than the NATS max payload of %d", size, nc.MaxPayload())}}
		data, merr = json.Marshal(reply)
	}
	if merr != nil {
		log.Error("llm gateway: encode reply", "err", merr)
		return
	}
	if err := m.Respond(data); err != nil {
		log.Warn("llm gateway: reply not sent", "err", err)
	}
}

// Gateway is the Client of a worker: it asks the scheduler's gateway.
type Gateway struct {
	NC *nats.Conn
	// Timeout of one request [10m]: the gateway's own retries happen
	// within it.
	Timeout time.Duration
}

// Chat sends the request through the gateway.
func (g Gateway) Chat(ctx context.Context, req Request) (Response, error) {
	if err := req.validate(); err != nil {
		return Response{}, err
	}
	data, err := json.Marshal(gatewayRequest{V: GatewayVersion, Request: req, Purpose: req.Purpose, Node: req.Node})
	if err != nil {
		return Response{}, err
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := g.NC.RequestWithContext(ctx, queue.LLMSubject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return Response{}, fmt.Errorf("%w: no scheduler answers %s (is the scheduler running with its LLM configured?)", ErrGateway, queue.LLMSubject)
		}
		return Response{}, fmt.Errorf("%w: %w", ErrGateway, err)
	}
	return decodeGatewayReply(m.Data)
}

// decodeGatewayReply reads the gateway's answer: a response, or an error
// whose kind maps back to this package's errors. Anything else is an
// ErrGateway naming what is wrong.
func decodeGatewayReply(data []byte) (Response, error) {
	var reply gatewayReply
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&reply); err != nil {
		return Response{}, fmt.Errorf("%w: malformed reply: %v", ErrGateway, err)
	}
	if reply.V != GatewayVersion {
		return Response{}, fmt.Errorf("%w: unknown version: v: %d (this build reads version %d)", ErrGateway, reply.V, GatewayVersion)
	}
	if reply.Error != nil {
		if base, ok := kindErrors[reply.Error.Kind]; ok {
			return Response{}, fmt.Errorf("%w: %w: %s", ErrGateway, base, reply.Error.Message)
		}
		return Response{}, fmt.Errorf("%w: %s: %s", ErrGateway, reply.Error.Kind, reply.Error.Message)
	}
	if reply.Response == nil {
		return Response{}, fmt.Errorf("%w: reply without a response or an error", ErrGateway)
	}
	return *reply.Response, nil
}
