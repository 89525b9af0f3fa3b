// Package writeup turns a finished search into a paper whose numbers are
// checked: the facts a paper may state come first, from the results tables
// (each with its id and the SQL that produced it); every numeric literal
// the model writes is then matched to one of them, within the rounding it
// shows, or to a short whitelist.
package writeup

// A Fact is one number the results tables hold, with what it is, the node
// it belongs to (empty for a run-wide one) and the SQL that produced it, so
// that a reader can run the query again.
type Fact struct {
	ID    string  `json:"id"`
	Claim string  `json:"claim"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	Node  string  `json:"node,omitempty"`
	SQL   string  `json:"sql"`
}
