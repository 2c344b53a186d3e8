package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

const completionSynopsis = "distlock completion bash|zsh|fish"

const completionAbout = `Completion prints a script that makes the shell complete distlock's
commands and flags, and the command after run's --. Load it with:

  bash:  source <(distlock completion bash)      e.g. in ~/.bashrc
  zsh:   source <(distlock completion zsh)       e.g. in ~/.zshrc, after compinit
  fish:  distlock completion fish > ~/.config/fish/completions/distlock.fish
`

// shells lists the shells completion writes scripts for.
var shells = []string{"bash", "zsh", "fish"}

func (c *cli) completionCmd(ctx context.Context, args []string) int {
	fs := c.flagSet("completion", completionSynopsis, completionAbout)
	if code, done := c.parse(fs, args); done {
		return code
	}
	if fs.NArg() != 1 {
		return c.usageError("completion", "want one shell: %s", strings.Join(shells, ", "))
	}
	cmds := c.completionCommands(ctx)
	var script string
	switch fs.Arg(0) {
	case "bash":
		script = bashCompletion(cmds)
	case "zsh":
		script = zshCompletion(cmds)
	case "fish":
		script = fishCompletion(cmds)
	default:
		return c.usageError("completion", "unknown shell %q (want %s)", fs.Arg(0), strings.Join(shells, ", "))
	}
	if _, err := fmt.Fprint(c.stdout, script); err != nil {
		return c.fail(exitSoftware, "completion", "writing output: %v", err)
	}
	return exitOK
}

// completionFlag is a flag as completion offers it.
type completionFlag struct {
	name    string
	summary string // the first line of its help
}

// completionCommand is a command as completion offers it.
type completionCommand struct {
	name, summary string
	flags         []completionFlag
	args          []string // words to offer as arguments
}

// defaultLine matches a flag in the output of flag.PrintDefaults.
var defaultLine = regexp.MustCompile(`(?m)^  -(\S+).*\n\s*(.*)$`)

// completionCommands describes the visible commands. Their flags are read
// from their own help, so that completion never lags behind them.
func (c *cli) completionCommands(ctx context.Context) []completionCommand {
	var names []string
	for _, cmd := range commands {
		if !cmd.hidden {
			names = append(names, cmd.name)
		}
	}
	var out []completionCommand
	for _, cmd := range commands {
		if cmd.hidden {
			continue
		}
		cc := completionCommand{name: cmd.name, summary: cmd.summary}
		switch cmd.name {
		case "help":
			cc.args = names
		case "completion":
			cc.args = shells
		default:
			var help lockedBuffer
			sub := &cli{stdin: strings.NewReader(""), stdout: &help, stderr: &help, getenv: func(string) string { return "" }}
			cmd.run(sub, ctx, []string{"-h"})
			for _, m := range defaultLine.FindAllStringSubmatch(help.String(), -1) {
				cc.flags = append(cc.flags, completionFlag{name: m[1], summary: strings.TrimSpace(m[2])})
			}
		}
		out = append(out, cc)
	}
	return out
}

func flagWords(cc completionCommand) string {
	words := make([]string, 0, len(cc.flags)+1)
	for _, f := range cc.flags {
		words = append(words, "--"+f.name)
	}
	return strings.Join(append(words, "--help"), " ")
}

func bashCompletion(cmds []completionCommand) string {
	var b strings.Builder
	names := make([]string, len(cmds))
	for i, cc := range cmds {
		names[i] = cc.name
	}
	fmt.Fprintf(&b, `# bash completion for distlock; load with: source <(distlock completion bash)
_distlock() {
    local cur=${COMP_WORDS[COMP_CWORD]} i
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "%s --help --version" -- "$cur"))
        return
    fi
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == -- ]]; then
            # The command that run runs, and then its own arguments.
            if [[ $i -eq $((COMP_CWORD - 1)) ]]; then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return
        fi
    done
    case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, cc := range cmds {
		words := flagWords(cc)
		if len(cc.args) > 0 {
			words = strings.Join(cc.args, " ")
		}
		fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", cc.name, words)
	}
	b.WriteString(`    esac
}
complete -o default -F _distlock distlock
`)
	return b.String()
}

func zshCompletion(cmds []completionCommand) string {
	var b strings.Builder
	b.WriteString(`#compdef distlock
# zsh completion for distlock; load with: source <(distlock completion zsh)
_distlock() {
    local -a commands
    commands=(
`)
	for _, cc := range cmds {
		fmt.Fprintf(&b, "        %s\n", zshQuote(cc.name+":"+cc.summary))
	}
	b.WriteString(`    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'distlock command' commands
        compadd -- --help --version
        return
    fi
    local i
    for (( i = 3; i < CURRENT; i++ )); do
        if [[ $words[i] == -- ]]; then
            # Complete the command that run runs as if typed alone.
            words=("${(@)words[i+1,-1]}")
            (( CURRENT -= i ))
            _normal
            return
        fi
    done
    case $words[2] in
`)
	for _, cc := range cmds {
		if len(cc.args) > 0 {
			fmt.Fprintf(&b, "        (%s) compadd -- %s ;;\n", cc.name, strings.Join(cc.args, " "))
			continue
		}
		fmt.Fprintf(&b, "        (%s)\n            local -a flags\n            flags=(\n", cc.name)
		for _, f := range cc.flags {
			fmt.Fprintf(&b, "                %s\n", zshQuote("--"+f.name+":"+f.summary))
		}
		b.WriteString("            )\n            _describe -t flags 'flag' flags ;;\n")
	}
	b.WriteString(`    esac
}
if [[ $funcstack[1] == _distlock ]]; then
    _distlock "$@"
else
    compdef _distlock distlock
fi
`)
	return b.String()
}

// zshQuote quotes s for zsh in single quotes; a colon in the word part of
// a _describe entry would end it, but names have none.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func fishCompletion(cmds []completionCommand) string {
	var b strings.Builder
	b.WriteString(`# fish completion for distlock; install with:
#   distlock completion fish > ~/.config/fish/completions/distlock.fish
complete -c distlock -n __fish_use_subcommand -l help -s h -d 'show help'
complete -c distlock -n __fish_use_subcommand -l version -s v -d 'print the version'
`)
	for _, cc := range cmds {
		fmt.Fprintf(&b, "complete -c distlock -f -n __fish_use_subcommand -a %s -d %s\n", cc.name, fishQuote(cc.summary))
	}
	for _, cc := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + cc.name)
		if len(cc.args) > 0 {
			fmt.Fprintf(&b, "complete -c distlock -f -n %s -a %s\n", cond, fishQuote(strings.Join(cc.args, " ")))
			continue
		}
		for _, f := range cc.flags {
			fmt.Fprintf(&b, "complete -c distlock -n %s -l %s -d %s\n", cond, f.name, fishQuote(f.summary))
		}
	}
	return b.String()
}

// fishQuote quotes s for fish in single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
