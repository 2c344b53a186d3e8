package redisnode

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

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
		issues := regexp.MustCompile(`\b(issue|take|grant)\(`).MatchString(s.body)
		if issues && (len(s.args) == 0 || s.args[len(s.args)-1] != "guard") {
			t.Errorf("%s issues tokens but does not take guard as its last argument", s.name)
		}
	}
}

// TestReceiptLife: the lock's receipt lasts COUNTER_LIFE, which is
// ReceiptTTL: the rule by which a grant skips looking for readers and
// permits (records in token.lua) needs a receipt that lasts no longer than
// the counter each of their grants writes.
func TestReceiptLife(t *testing.T) {
	want := "local COUNTER_LIFE = " + strconv.FormatInt(ReceiptTTL.Milliseconds(), 10) + "\n"
	if !strings.Contains(tokenLib, want) {
		t.Errorf("token.lua does not hold %q", want)
	}
}
