package scheduler

import (
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hpcq/hpcq/internal/cli"
	"github.com/hpcq/hpcq/internal/config"
	"github.com/hpcq/hpcq/pkg/run"
	"github.com/hpcq/hpcq/pkg/rundir"
)

// memoryOverrides are the memory settings of the environment and the
// seed's flags (config.Memory), for run.MemoryOverrides.Apply.
func memoryOverrides(cfg *config.Scheduler) run.MemoryOverrides {
	m := cfg.Memory
	return run.MemoryOverrides{Enabled: m.MemoryEnabled, DB: m.MemoryDB, CoreMaxChars: m.MemoryCoreMax, RecallMaxEvents: m.MemoryRecall,
		RetrievalK: m.MemoryK, MaxCompressionIterations: m.MemoryCompress}
}

// CheckOptions are what `scheduler check` is asked.
type CheckOptions struct {
	IdeaDir string
	Out     io.Writer
}

// Check is `scheduler check IDEA_DIR`: it reads and validates the idea
// directory with the environment and flags applied as `run` would, and
// prints the resolved settings and where the run would keep its memory and
// results and which model would answer. It starts nothing. An invalid
// setting is cli.ErrInvalidInput naming the key.
func Check(cfg *config.Scheduler, o CheckOptions) error {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	spec, err := loadIdea(o.IdeaDir)
	if err == nil {
		err = memoryOverrides(cfg).Apply(&spec)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", cli.ErrInvalidInput, err)
	}
	_, llmInfo, llmErr := llmChoice(spec, o.IdeaDir)
	shown := spec
	shown.Idea = fmt.Sprintf("(%d characters; first line: %s)", len(spec.Idea), firstLine(spec.Idea))
	data, err := yaml.Marshal(shown)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s: valid\n\n# resolved settings (run.yaml, then HPCQ_MEMORY_*, then the flags)\n%s\n", o.IdeaDir, data)
	memory := "off"
	switch {
	case !*spec.Memory.Enabled:
	case cfg.Store.RedisURL != "" && cfg.Store.ClickHouseDSN != "":
		memory = fmt.Sprintf("cluster: Redis %s, ClickHouse %s", config.RedactURL(cfg.Store.RedisURL), config.RedactURL(cfg.Store.ClickHouseDSN))
	case spec.Memory.DBPath != "":
		memory = "SQLite " + spec.Memory.DBPath
	default:
		memory = "SQLite RUN_DIR/" + rundir.MemoryDB
	}
	results := "SQLite RUN_DIR/" + rundir.ResultsFile
	if cfg.Store.ClickHouseDSN != "" {
		results = "ClickHouse " + config.RedactURL(cfg.Store.ClickHouseDSN)
	}
	model := ""
	switch {
	case llmErr != nil:
		model = "none: " + llmErr.Error()
	case llmInfo["backend"] == "openai":
		model = fmt.Sprintf("%s at %s", llmInfo["model"], llmInfo["base_url"])
		if llmInfo["base_url"] == "" {
			model = llmInfo["model"] + " (OpenAI)"
		}
	case llmInfo["scripted"] != "":
		model = "the scripted replies of " + llmInfo["cassette"] + " (no model configured)"
	default:
		model = "replay of " + llmInfo["cassette"]
	}
	fmt.Fprintf(o.Out, "memory:  %s\nresults: %s\nmodel:   %s\n", memory, results, model)
	return nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
