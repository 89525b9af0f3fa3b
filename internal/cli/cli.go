// Package cli is what hpcq's commands share around their flags: exit
// statuses without a message of their own, and flag parsing that maps
// -h to status 0 and a bad flag to status 2. Exit statuses: 0 success, 1 a
// failure (tasks failed, no node produced the metric, a run canceled or
// interrupted, a server unreachable), 2 a usage error or invalid input.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/hpcq/hpcq/internal/term"
	"github.com/hpcq/hpcq/internal/version"
)

// ExitError carries an exit status without a message of its own (the
// command printed what it had to say).
type ExitError int

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ErrInvalidInput marks an error in what the user gave (a task file, an
// idea directory, a run directory that is not one): exit status 2, like a
// usage error, so that scripts tell it from a run whose tasks failed (1).
var ErrInvalidInput = errors.New("invalid input")

// Main runs a command's dispatch on the process's arguments and exits:
// 0 on success, the status of an ExitError, else 1 after printing
// "<name>: <error>" on stderr. "--version" (or "version") alone prints the
// build's version, for every command alike.
func Main(name string, dispatch func(args []string) error) {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(name, version.Version)
		os.Exit(0)
	}
	err := dispatch(os.Args[1:])
	var ee ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(int(ee))
	case errors.Is(err, ErrInvalidInput):
		fmt.Fprintln(term.Stderr(), name+":", err)
		os.Exit(2)
	default:
		// An error may carry a program's output or a model's words.
		fmt.Fprintln(term.Stderr(), name+":", err)
		os.Exit(1)
	}
}

// Parse parses flags wherever they are among the arguments (as git and
// kubectl users expect: `logs n0001 --phase compile`); "--" ends them.
// fs.Args() are then the other arguments, in order. -h prints the usage
// and is ExitError(0); a bad flag is one line and a hint, ExitError(2).
func Parse(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // printed below, once, and only for -h
	defer func() { fs.Usage = usage }()
	var rest []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return ExitError(0)
		}
		if err != nil { // the flag package said what
			fmt.Fprintf(fs.Output(), "run '%s -h' for its usage\n", fs.Name())
			return ExitError(2)
		}
		left := fs.Args()
		used := len(args) - len(left)
		if len(left) == 0 || (used > 0 && args[used-1] == "--") {
			rest = append(rest, left...)
			break
		}
		rest, args = append(rest, left[0]), left[1:]
	}
	return fs.Parse(append([]string{"--"}, rest...))
}

// BadArgs says in two lines that fs's command got arguments it does not
// take (what, and the usage line with a hint) and is ExitError(2): not
// the whole usage for one stray word.
func BadArgs(fs *flag.FlagSet, what string) error {
	var b strings.Builder
	out := fs.Output()
	fs.SetOutput(&b)
	fs.Usage()
	fs.SetOutput(out)
	line, _, _ := strings.Cut(b.String(), "\n")
	if !strings.HasPrefix(line, "usage:") {
		line = "usage: " + fs.Name() + " [flags]"
	}
	fmt.Fprintf(out, "%s: %s\n%s (-h for the flags)\n", fs.Name(), what, line)
	return ExitError(2)
}

// FlagNames are the flags of fs as typed: "--name", sorted.
func FlagNames(fs *flag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *flag.Flag) { out = append(out, "--"+f.Name) })
	sort.Strings(out)
	return out
}

// Completion is a completion script for shell (bash, zsh or fish) of prog:
// commands maps each subcommand to its flags, "" to the flags of prog run
// without one. Words are completed; file names where nothing matches.
func Completion(shell, prog string, commands map[string][]string) (string, error) {
	names := make([]string, 0, len(commands))
	for c := range commands {
		if c != "" {
			names = append(names, c)
		}
	}
	sort.Strings(names)
	root := strings.Join(commands[""], " ")
	fn := "_" + strings.NewReplacer("-", "_").Replace(prog)
	var b strings.Builder
	switch shell {
	case "bash", "zsh":
		if shell == "zsh" {
			b.WriteString("autoload -U +X bashcompinit && bashcompinit\n")
		}
		fmt.Fprintf(&b, "%s() {\n  local cur=\"${COMP_WORDS[COMP_CWORD]}\" sub=\"${COMP_WORDS[1]}\"\n", fn)
		fmt.Fprintf(&b, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); else\n",
			strings.TrimSpace(strings.Join(names, " ")+" "+root))
		b.WriteString("  case \"$sub\" in\n")
		for _, c := range names {
			fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n", c, strings.Join(commands[c], " "))
		}
		fmt.Fprintf(&b, "    *) COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n  esac\n  fi\n", root)
		b.WriteString("  if [ ${#COMPREPLY[@]} -eq 0 ]; then COMPREPLY=($(compgen -f -- \"$cur\")); fi\n}\n")
		fmt.Fprintf(&b, "complete -F %s %s\n", fn, prog)
	case "fish":
		if len(names) > 0 {
			fmt.Fprintf(&b, "complete -c %s -n '__fish_use_subcommand' -a %q\n", prog, strings.Join(names, " "))
		}
		for _, c := range names {
			for _, f := range commands[c] {
				fmt.Fprintf(&b, "complete -c %s -n '__fish_seen_subcommand_from %s' -l %s\n", prog, c, strings.TrimPrefix(f, "--"))
			}
		}
		for _, f := range commands[""] {
			fmt.Fprintf(&b, "complete -c %s -l %s\n", prog, strings.TrimPrefix(f, "--"))
		}
	default:
		return "", fmt.Errorf("shell %q: bash, zsh or fish", shell)
	}
	return b.String(), nil
}

// PrintCompletion is the "completion SHELL" command of prog: args are its
// arguments; flags as for Completion.
func PrintCompletion(prog string, args []string, flags map[string][]string) error {
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "usage: %s completion bash|zsh|fish\n", prog)
		return ExitError(2)
	}
	script, err := Completion(args[0], prog, flags)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s completion: %v\n", prog, err)
		return ExitError(2)
	}
	fmt.Print(script)
	return nil
}
