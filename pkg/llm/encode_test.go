package llm

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireSameBody: the request's body is json.Marshal's bytes for it (or
// both refuse it).
func requireSameBody(t *testing.T, model string, req Request) {
	t.Helper()
	want, wantErr := marshalChat(model, req)
	got, err := encodeChat(model, req)
	if wantErr != nil {
		require.Error(t, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// requireChatAsMarshal: requireSameBody, the body written without
// reflection when fast says so.
func requireChatAsMarshal(t *testing.T, model string, req Request, fast bool) {
	t.Helper()
	requireSameBody(t, model, req)
	_, ok := appendChat(nil, model, req)
	require.Equal(t, fast, ok)
}

// TestEncodeChatAsMarshal: every request's body is json.Marshal's, with
// and without the optional fields, temperatures written in decimal and in
// exponent notation (those through json.Marshal), images (through
// json.Marshal), and what json.Marshal refuses.
func TestEncodeChatAsMarshal(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	msgs := []Message{{Role: "system", Content: "be \"brief\" <now> & \n\t\xff \u2028"}, {Role: "user", Content: "日本語"}}
	requireChatAsMarshal(t, "m", Request{Messages: msgs}, true)
	requireChatAsMarshal(t, "", Request{}, true)
	requireChatAsMarshal(t, "gpt-x", Request{Messages: msgs, MaxTokens: 4096, Temperature: f(0), JSON: true}, true)
	for _, v := range []float64{0.7, 1, 2, -0.5, math.Copysign(0, -1), 1e-6, 123456789.125, 1e20} {
		requireChatAsMarshal(t, "m", Request{Messages: msgs, Temperature: f(v)}, true)
	}
	for _, v := range []float64{1e-7, 1e21, 5e-324} {
		requireChatAsMarshal(t, "m", Request{Messages: msgs, Temperature: f(v)}, false)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		_, err := encodeChat("m", Request{Messages: msgs, Temperature: f(v)})
		require.Error(t, err, "json.Marshal refuses %v", v)
	}
	img := []Message{{Role: "user", Content: "look", Images: []Image{{MIME: "image/png", Data: []byte{1, 2, 3}}}}}
	requireChatAsMarshal(t, "m", Request{Messages: img, MaxTokens: 10}, false)
}

func FuzzEncodeChatAsMarshal(f *testing.F) {
	f.Add("m", "system", "content \"x\" \n<>&", "user", 100, 0.2, true, false)
	f.Add("", "", "\xff\xfe\u2029", "", 0, 1e-9, false, true)
	f.Fuzz(func(t *testing.T, model, role1, content1, content2 string, maxTokens int, temp float64, json, noTemp bool) {
		req := Request{Messages: []Message{{Role: role1, Content: content1}, {Role: "user", Content: content2}}, MaxTokens: maxTokens, JSON: json}
		if !noTemp {
			req.Temperature = &temp
		}
		requireSameBody(t, model, req)
	})
}
