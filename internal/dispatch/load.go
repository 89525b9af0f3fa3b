package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/hpcq/hpcq/pkg/schema"
)

// LoadTasks reads hand-written tasks: each file holds one task object or an
// array of them. run_id is set to runID; attempt defaults to 1 and pool to
// "cpu". Every task is validated; the error names the file and the field.
func LoadTasks(paths []string, runID string) ([]*schema.NodeTask, error) {
	var out []*schema.NodeTask
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("task file: %w", err)
		}
		var items []json.RawMessage
		if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
			if err := json.Unmarshal(t, &items); err != nil {
				return nil, fmt.Errorf("task file %s: %w", p, err)
			}
		} else {
			items = []json.RawMessage{data}
		}
		for i, raw := range items {
			where := p
			if len(items) > 1 {
				where = fmt.Sprintf("%s[%d]", p, i)
			}
			t, err := schema.DecodeTaskDraft(raw)
			if err != nil {
				return nil, fmt.Errorf("task file %s: %w", where, err)
			}
			t.RunID = runID
			if t.Attempt == 0 {
				t.Attempt = 1
			}
			if t.Pool == "" {
				t.Pool = "cpu"
			}
			if err := t.Validate(); err != nil {
				return nil, fmt.Errorf("task file %s: %w", where, err)
			}
			out = append(out, t)
		}
	}
	return out, nil
}
