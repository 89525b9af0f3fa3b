package prompt

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/pkg/llm"
)

// requireAsMarshal: r's line is json.Marshal's bytes for it.
func requireAsMarshal(t *testing.T, r LogRecord) {
	t.Helper()
	want, wantErr := json.Marshal(&r)
	got, err := r.appendJSON([]byte("kept"))
	if wantErr != nil {
		require.Error(t, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, "kept"+string(want), string(got))
}

// TestLogRecordAsMarshal: a record's JSON line, written without
// reflection, is json.Marshal's: fields left out when empty as the tags
// say, no messages and nil ones, images (through json.Marshal), a time
// zone, and a year and a zone json.Marshal refuses.
func TestLogRecordAsMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 20, 1, 2, 345678900, time.UTC)
	full := LogRecord{N: 12, Time: at, Node: "n0001", Purpose: "draft", Attempt: 2,
		Messages: []llm.Message{{Role: "system", Content: "a \"quoted\" <b>&\n\ttab \xff \u2028"}, {Role: "user", Content: "日本"}},
		Reply:    "reply", Model: "m", TokensIn: 10, TokensOut: -3, Error: "failed: <x>"}
	requireAsMarshal(t, full)
	requireAsMarshal(t, LogRecord{})
	requireAsMarshal(t, LogRecord{Messages: []llm.Message{}})
	requireAsMarshal(t, LogRecord{N: 1, Time: at.In(time.FixedZone("x", -5*3600+30*60)), Messages: []llm.Message{{}}})
	withImage := full
	withImage.Messages = []llm.Message{{Role: "user", Content: "see", Images: []llm.Image{{MIME: "image/png", Data: []byte{1, 2, 3}}}}}
	requireAsMarshal(t, withImage)
	requireAsMarshal(t, LogRecord{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	requireAsMarshal(t, LogRecord{Time: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)})
	requireAsMarshal(t, LogRecord{Time: at.In(time.FixedZone("far", 25*3600))})
}

func FuzzLogRecordAsMarshal(f *testing.F) {
	f.Add(1, int64(1764014400123456789), "n1", "draft", "system", "content \"x\" \n", "reply", "", 5, 0)
	f.Add(0, int64(0), "", "", "", "\xff<>&\u2029", "", "e", 0, -1)
	f.Fuzz(func(t *testing.T, n int, unixNano int64, node, purpose, role, content, reply, errText string, in, out int) {
		requireAsMarshal(t, LogRecord{N: n, Time: time.Unix(0, unixNano).UTC(), Node: node, Purpose: purpose, Attempt: n % 7,
			Messages: []llm.Message{{Role: role, Content: content}, {Role: "user", Content: reply + content}},
			Reply:    reply, Model: role, TokensIn: in, TokensOut: out, Error: errText})
	})
}
