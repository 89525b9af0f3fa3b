// The run directory's JSON files read: a missing file is no error, a
// broken one names its path.

package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/hpcq/hpcq/internal/fileio"
	"github.com/hpcq/hpcq/internal/jsonw"
)

// ReadJSON reads the JSON file at path into v; ok is false when the file
// does not exist.
func ReadJSON(path string, v any) (ok bool, err error) {
	data, err := fileio.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// WriteJSON writes v, indented, to path through a temporary file and a
// rename.
func WriteJSON(path string, v any) error {
	data, err := jsonw.MarshalIndent(v)
	if err != nil {
		return err
	}
	return fileio.WriteFileAtomic(path, append(data, '\n'))
}

// ReadOutcome reads node's result.json; ok is false while the node has
// none (it has not ended).
func (d Dir) ReadOutcome(node string) (o Outcome, ok bool, err error) {
	return ReadOutcomeFile(d.Path(NodeFile(node, ResultFile)))
}

// ReadOutcomeFile reads a result.json at path (a reader that caches by
// path: internal/filecache); ok is false when there is none.
func ReadOutcomeFile(path string) (o Outcome, ok bool, err error) {
	ok, err = ReadJSON(path, &o)
	return o, ok, err
}

// End is how the last session of a run ended (journal/end.json): a run
// with one has ended (by itself, or canceled); one without is going or was
// interrupted.
type End struct {
	// Status is the run's status (schema.Run*), as its runs row says.
	Status    string         `json:"status,omitempty"`
	StoppedBy string         `json:"stopped_by,omitempty"`
	Notes     map[int]string `json:"stage_notes,omitempty"`
	// Canceled is the reason of a cancel that ended the run.
	Canceled string `json:"canceled,omitempty"`
}

// ReadEnd reads how the run ended; ok is false for a run that has not.
func (d Dir) ReadEnd() (end End, ok bool, err error) {
	ok, err = ReadJSON(d.Path(EndFile), &end)
	return end, ok, err
}
