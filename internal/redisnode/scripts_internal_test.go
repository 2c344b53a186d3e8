package redisnode

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// topLocal matches a top-level local declaration: its names.
var topLocal = regexp.MustCompile(`^local (?:function )?([\w, ]+?)\s*(?:=|\(|$)`)

// TestScriptTable: every script reads its keys and arguments by the names
// its row gives, never by position, and names each once.
func TestScriptTable(t *testing.T) {
	positional := regexp.MustCompile(`(KEYS|ARGV)\[`)
	for _, s := range scripts {
		for i, line := range strings.Split(s.body, "\n") {
			if code, _, _ := strings.Cut(line, "--"); positional.MatchString(code) {
				t.Errorf("%s line %d reads KEYS or ARGV by position: %s", s.name, i+1, line)
			}
		}
		seen := map[string]bool{}
		for _, b := range s.keys {
			if seen[b.local] {
				t.Errorf("%s names %q twice", s.name, b.local)
			}
			seen[b.local] = true
		}
		for _, a := range s.args {
			if seen[a] {
				t.Errorf("%s names %q twice", s.name, a)
			}
			seen[a] = true
		}
		// A top-level local of the helpers or the body that took a key's or
		// an argument's name would hide it from the lines after it.
		for _, part := range append([]string{preludeLib, s.body}, s.libs...) {
			for _, line := range strings.Split(part, "\n") {
				m := topLocal.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				for _, name := range strings.Split(m[1], ",") {
					if name = strings.TrimSpace(name); seen[name] {
						t.Errorf("%s: %q declares the local %s, a key's or an argument's name", s.name, line, name)
					}
				}
			}
		}
		issues := regexp.MustCompile(`\b(issue|take|take_quiet|grant|mint)\(`).MatchString(s.body)
		args := s.args
		args = args[:len(args)-s.optArgs] // guard is last when the optional ones are left off
		if issues && (len(args) == 0 || args[len(args)-1] != "guard") {
			t.Errorf("%s issues tokens but does not take guard as its last argument", s.name)
		}
	}
}

// TestReceiptLife: the lock's receipt lasts COUNTER_LIFE, which is
// ReceiptTTL: the rule by which a grant skips looking for readers and
// permits (records in token.lua, take_quiet in prelude.lua) needs a receipt that lasts no longer than
// the counter each of their grants writes.
func TestReceiptLife(t *testing.T) {
	want := "local COUNTER_LIFE = " + strconv.FormatInt(ReceiptTTL.Milliseconds(), 10) + "\n"
	if !strings.Contains(preludeLib, want) {
		t.Errorf("prelude.lua does not hold %q", want)
	}
}

// TestFastPaths: the scripts of an uncontended lock decide it before the
// helpers are built, and a fast path calls no helper: one built after it
// would be an undefined global there, an error only on that path.
func TestFastPaths(t *testing.T) {
	for _, s := range []*script{acquireScript, releaseScript, fairScript} {
		if !strings.Contains(s.body, helpersMark) {
			t.Errorf("%s has no fast path before its helpers", s.name)
		}
	}
	defined := regexp.MustCompile(`(?m)^local function (\w+)`)
	for _, s := range scripts {
		fast, _, ok := strings.Cut(s.body, helpersMark)
		if !ok {
			continue
		}
		for _, lib := range s.libs {
			for _, m := range defined.FindAllStringSubmatch(lib, -1) {
				if regexp.MustCompile(`\b` + m[1] + `\(`).MatchString(fast) {
					t.Errorf("%s's fast path calls %s, a helper built after it", s.name, m[1])
				}
			}
		}
	}
}
