package run

import (
	"fmt"
	"path/filepath"
)

// MemoryOverrides are the memory settings given outside run.yaml: the
// environment (HPCQ_MEMORY_*) and the seed's flags (--enable_memgpt,
// --memory_db, --memory_core_max_chars, --memory_recall_max_events,
// --memory_retrieval_k, --memory_max_compression_iterations). A nil field
// leaves run.yaml's value.
type MemoryOverrides struct {
	Enabled                  *bool
	DB                       *string
	CoreMaxChars             *int
	RecallMaxEvents          *int
	RetrievalK               *int
	MaxCompressionIterations *int
}

// Apply sets s's memory settings from o and checks the result. A relative
// database path is made absolute (from the working directory): a resume
// or an export reads it from spec.json, maybe from elsewhere.
func (o MemoryOverrides) Apply(s *Spec) error {
	m := &s.Memory
	if o.Enabled != nil {
		m.Enabled = o.Enabled
	}
	if o.DB != nil {
		m.DBPath = *o.DB
	}
	for _, f := range []struct {
		v   *int
		dst *int
	}{{o.CoreMaxChars, &m.CoreMaxChars}, {o.RecallMaxEvents, &m.RecallMaxEvents}, {o.RetrievalK, &m.RetrievalK},
		{o.MaxCompressionIterations, &m.MaxCompressionIterations}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if m.DBPath != "" && !filepath.IsAbs(m.DBPath) {
		abs, err := filepath.Abs(m.DBPath)
		if err != nil {
			return fmt.Errorf("%w: memory.db_path: %w", ErrSpec, err)
		}
		m.DBPath = abs
	}
	return s.Validate()
}
