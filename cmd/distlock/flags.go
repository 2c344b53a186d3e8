package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// envPrefix starts the name of the environment variable that gives a flag
// its value when the command line does not: --ttl is $DISTLOCK_TTL.
const envPrefix = "DISTLOCK_"

// envName returns the environment variable of the flag named name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// documentEnv appends its environment variable to the help of each flag of
// fs but those in skip. Call it after the flags are defined, before parse.
func documentEnv(fs *flag.FlagSet, skip ...string) {
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(skip, f.Name) {
			f.Usage += " ($" + envName(f.Name) + ")"
		}
	})
}

// applyEnv sets each flag of fs that the command line did not set, but
// those in skip, from its environment variable if that is set: flags win
// over the environment. When done is true the command must exit with code
// (a bad value was reported).
func (c *cli) applyEnv(fs *flag.FlagSet, skip ...string) (code int, done bool) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var bad string
	fs.VisitAll(func(f *flag.Flag) {
		if bad != "" || set[f.Name] || slices.Contains(skip, f.Name) {
			return
		}
		v := c.getenv(envName(f.Name))
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			bad = fmt.Sprintf("$%s=%s: %s", envName(f.Name), v, valueProblem(f, v, err))
		}
	})
	if bad != "" {
		return c.usageError(strings.TrimPrefix(fs.Name(), "distlock "), "%s", bad), true
	}
	return 0, false
}

// The flag package's messages, which name a flag with one dash and call
// every bad value a "parse error".
var (
	badValue   = regexp.MustCompile(`^invalid (?:boolean )?value "((?:[^"\\]|\\.)*)" for (?:flag )?-([^:]+): (.*)$`)
	undefined  = regexp.MustCompile(`^flag provided but not defined: -(.*)$`)
	needsValue = regexp.MustCompile(`^flag needs an argument: -(.*)$`)
)

// flagError rewrites an error of fs.Parse(args) in the spelling the user
// typed, with what to do about it: `--ttl 5: missing unit, e.g. 5s`
// rather than `invalid value "5" for flag -ttl: parse error`.
func flagError(fs *flag.FlagSet, args []string, err error) string {
	msg := err.Error()
	if m := badValue.FindStringSubmatch(msg); m != nil {
		value, name := m[1], m[2]
		if uq, err := strconv.Unquote(`"` + value + `"`); err == nil {
			value = uq
		}
		f := fs.Lookup(name)
		if f == nil {
			return msg
		}
		return fmt.Sprintf("%s %s: %s", spelling(args, name), value, valueProblem(f, value, fmt.Errorf("%s", m[3])))
	}
	if m := undefined.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown flag %s", spelling(args, m[1]))
	}
	if m := needsValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s needs a value", spelling(args, m[1]))
	}
	return msg
}

// spelling returns how the user wrote the flag named name in args: -ttl or
// --ttl; --name if it cannot be found.
func spelling(args []string, name string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		a, _, _ = strings.Cut(a, "=")
		if strings.HasPrefix(a, "-") && strings.TrimLeft(a, "-") == name {
			return a
		}
	}
	return "--" + name
}

// valueProblem says what is wrong with value for f, which refused it
// with err, and how to write it.
func valueProblem(f *flag.Flag, value string, err error) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err.Error()
	}
	switch g.Get().(type) {
	case time.Duration:
		return durationProblem(value)
	case bool:
		return "want true or false"
	case int, int64, uint, uint64:
		if strings.Contains(err.Error(), "range") {
			return "out of range"
		}
		return "want a whole number"
	}
	return err.Error()
}

// durationProblem says why value is not a duration.
func durationProblem(value string) string {
	if _, err := strconv.ParseFloat(value, 64); err == nil {
		return fmt.Sprintf("missing unit, e.g. %ss", value)
	}
	return "want a duration such as 30s, 1m30s or 500ms"
}
