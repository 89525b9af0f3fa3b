package llm

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
)

// scripted answers by the last message: "big" gets a reply larger than the
// NATS max payload, "unknown" gets ErrNoReply, anything else an echo.
type scripted struct{ maxPayload int64 }

func (s scripted) Chat(_ context.Context, req Request) (Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	switch last {
	case "big":
		return Response{Content: strings.Repeat("x", int(s.maxPayload)+1)}, nil
	case "unknown":
		return Response{}, ErrNoReply
	}
	return Response{Content: "echo: " + last + " for " + req.Purpose + "/" + req.Node, Model: "m", TokensIn: 3, TokensOut: 4}, nil
}

// TestGateway: a worker's Gateway client gets the scheduler's answers over
// NATS (embedded and nats-server), errors keep their kind, and what cannot
// be answered says why.
func TestGateway(t *testing.T) {
	t.Parallel()
	for _, kind := range testutil.ServerKinds {
		t.Run(kind, func(t *testing.T) {
			srv := testutil.StartNATS(t, kind)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			worker := Gateway{NC: srv.Connect(t), Timeout: 10 * time.Second}

			_, err := worker.Chat(ctx, ask("hello"))
			require.ErrorIs(t, err, ErrGateway)
			require.ErrorContains(t, err, "no scheduler answers hpcq.llm.chat")

			scheduler := srv.Connect(t)
			served := make(chan error, 1)
			go func() { served <- Serve(ctx, scheduler, scripted{scheduler.MaxPayload()}, testutil.Logger(t)) }()
			testutil.Eventually(t, 5*time.Second, "the gateway to answer", func() bool {
				_, err := worker.Chat(ctx, ask("ping"))
				return err == nil
			})

			resp, err := worker.Chat(ctx, ask("hello"))
			require.NoError(t, err)
			require.Equal(t, "echo: hello for draft/n1", resp.Content, "purpose and node travel with the request")
			require.Equal(t, 4, resp.TokensOut)

			_, err = worker.Chat(ctx, ask("unknown"))
			require.ErrorIs(t, err, ErrNoReply)
			_, err = worker.Chat(ctx, ask("big"))
			require.ErrorIs(t, err, ErrGateway)
			require.ErrorContains(t, err, "more than the NATS max payload")
			_, err = worker.Chat(ctx, Request{})
			require.ErrorIs(t, err, ErrBadRequest, "checked before sending")

			// Raw messages: malformed and unknown versions get a clear error reply.
			for raw, want := range map[string]string{
				`{not json`: "malformed request",
				`{"v": 2, "request": {"messages": [{"role": "user", "content": "x"}]}}`:             "unknown version: v: 2",
				`{"v": 1, "request": {"messages": []}}`:                                             "no messages",
				`{"v": 1, "request": {"messages": [{"role": "user", "content": "x"}]}, "extra": 1}`: "unknown field",
			} {
				m, err := worker.NC.Request(queue.LLMSubject, []byte(raw), 5*time.Second)
				require.NoError(t, err)
				var reply gatewayReply
				require.NoError(t, json.Unmarshal(m.Data, &reply))
				require.NotNil(t, reply.Error, raw)
				require.Equal(t, "bad_request", reply.Error.Kind)
				require.Contains(t, reply.Error.Message, want)
			}
			cancel()
			require.NoError(t, <-served)
		})
	}
}

// TestGatewayRecordsInTheScheduler: calls through the gateway are metered
// where the key is, in the scheduler's process.
func TestGatewayRecordsInTheScheduler(t *testing.T) {
	t.Parallel()
	srv := testutil.StartNATS(t, "embedded")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replayPath := filepath.Join(t.TempDir(), "c.jsonl")
	k, l := Keys(ask("install openmp"))
	line, err := json.Marshal(exchange{Key: k, LooseKey: l, Request: ask("install openmp"), Response: Response{Content: `{"command": "true"}`, Model: "m", TokensIn: 10, TokensOut: 5}})
	require.NoError(t, err)
	require.NoError(t, writeFile(replayPath, append(line, '\n')))
	r, err := OpenReplay(replayPath)
	require.NoError(t, err)
	m := &Metered{Client: r}
	go func() { _ = Serve(ctx, srv.Connect(t), m, testutil.Logger(t)) }()
	w := Gateway{NC: srv.Connect(t)}
	testutil.Eventually(t, 5*time.Second, "an answer", func() bool {
		resp, err := w.Chat(ctx, ask("install openmp"))
		return err == nil && resp.Content == `{"command": "true"}`
	})
	require.GreaterOrEqual(t, m.Usage().CacheHits, int64(1))
}

// FuzzGatewayRequest: any message decodes or fails with ErrBadRequest,
// never panics, and what decodes is a valid request.
func FuzzGatewayRequest(f *testing.F) {
	f.Add([]byte(`{"v": 1, "request": {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5}, "purpose": "draft"}`))
	f.Add([]byte(`{"v": 1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeGatewayRequest(data)
		if err != nil {
			require.ErrorIs(t, err, ErrBadRequest)
			return
		}
		require.NoError(t, r.Request.validate())
		require.Equal(t, GatewayVersion, r.V)
	})
}

func FuzzGatewayReply(f *testing.F) {
	f.Add([]byte(`{"v": 1, "response": {"content": "hi", "tokens_in": 3}}`))
	f.Add([]byte(`{"v": 1, "error": {"kind": "budget", "message": "spent"}}`))
	f.Add([]byte(`{"v": 2}`))
	f.Add([]byte(`{"v": 1}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := decodeGatewayReply(data)
		if err != nil {
			require.ErrorIs(t, err, ErrGateway)
			require.Zero(t, resp)
		}
	})
}
