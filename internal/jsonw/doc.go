// Package jsonw writes JSON by appending to a byte slice, for the records
// hpcq writes many times per node (the prompt logs, the memory journal,
// Phase 0's record, the chat requests): what encoding/json does through
// reflection and an intermediate buffer, done in place.
//
// AppendString writes exactly what json.Marshal writes for a string, so a
// record written here and one written by encoding/json are the same bytes
// (FuzzAppendString holds it to that). It reads eight bytes at a time
// while none needs escaping: prompts are long runs of plain text.
package jsonw
