package prompt

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStep(t *testing.T) {
	t.Parallel()
	s, err := ParseStep(`{"command": " apt-get install -y libopenblas-dev ", "done": false, "reason": "BLAS"}`)
	require.NoError(t, err)
	require.Equal(t, "apt-get install -y libopenblas-dev", s.Command)
	s, err = ParseStep("```json\n{\"done\": true, \"reason\": \"all there\"}\n```")
	require.NoError(t, err)
	require.True(t, s.Done)
	for _, bad := range []string{``, `run make`, `{"command": "make", "done": true}`, `{"done": false}`, `{"command": "x", "sudo": true}`,
		`{"command": "` + strings.Repeat("x", MaxCommandBytes+1) + `"}`, `{"command": "a\u0000b"}`, `{"command": 5}`, `{} {}`} {
		_, err := ParseStep(bad)
		require.ErrorIs(t, err, ErrStep, bad)
	}
}

func FuzzParseStep(f *testing.F) {
	f.Add(`{"command": "make", "done": false}`)
	f.Add(`{"done": true}`)
	f.Fuzz(func(t *testing.T, reply string) {
		s, err := ParseStep(reply)
		if err != nil {
			require.ErrorIs(t, err, ErrStep)
			return
		}
		require.True(t, s.Done != (s.Command != ""))
		require.LessOrEqual(t, len(s.Command), MaxCommandBytes)
	})
}

// TestInstall: the model's commands run one by one with their results fed
// back, a bad reply is retried, and done ends it; the step limit holds.
func TestInstall(t *testing.T) {
	t.Parallel()
	c, prompts := fakeModel(t,
		`{"command": "which gcc", "done": false, "reason": "check the compiler"}`,
		`not json`,
		`{"command": "gcc --version", "done": false}`,
		`{"done": true, "reason": "gcc is there"}`)
	var cmds []string
	steps, err := Install(context.Background(), InstallParams{Client: c, Messages: ask(), Node: "n1",
		Run: func(_ context.Context, cmd string) (CommandResult, error) {
			cmds = append(cmds, cmd)
			return CommandResult{ExitCode: 0, Output: "/usr/bin/gcc"}, nil
		}})
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, []string{"which gcc", "gcc --version"}, cmds)
	require.Contains(t, (*prompts)[1], "Command 1: which gcc\nExit code: 0\nOutput:\n/usr/bin/gcc")
	require.Contains(t, (*prompts)[2], "could not be used")

	loop, _ := fakeModel(t, `{"command": "true", "done": false}`)
	steps, err = Install(context.Background(), InstallParams{Client: loop, Messages: ask(), MaxSteps: 3,
		Run: func(context.Context, string) (CommandResult, error) { return CommandResult{}, nil }})
	require.ErrorIs(t, err, ErrInstall)
	require.ErrorContains(t, err, "3 commands run and not done")
	require.Len(t, steps, 3)

	junk, _ := fakeModel(t, `sure!`)
	_, err = Install(context.Background(), InstallParams{Client: junk, Messages: ask(), Retries: 1,
		Run: func(context.Context, string) (CommandResult, error) { return CommandResult{}, nil }})
	require.ErrorContains(t, err, "2 unusable replies in a row")
}
