package llm

import "github.com/hpcq/hpcq/internal/jsonw"

// AppendMessagesJSON appends msgs, which have no images, as the JSON array
// json.Marshal writes for them (a nil slice as null): a prompt log's
// messages.
func AppendMessagesJSON(dst []byte, msgs []Message) []byte {
	return jsonw.AppendList(dst, msgs, func(dst []byte, m Message) []byte {
		dst = jsonw.AppendString(append(dst, `{"role":`...), m.Role)
		return append(jsonw.AppendString(append(dst, `,"content":`...), m.Content), '}')
	})
}
