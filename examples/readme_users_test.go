package examples_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeForUsers keeps the README a page for users: about 300 lines,
// the install command before the quick start, and the two commands, one
// for the demo and one for the tests, the latter being what CI runs.
func TestReadmeForUsers(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if n := strings.Count(md, "\n"); n > 330 {
		t.Errorf("README.md has %d lines; keep it to about 300 and move depth to docs/", n)
	}
	install := strings.Index(md, "go get github.com/distlock-go/distlock@latest")
	quick := strings.Index(md, "## Quick start")
	if install < 0 || quick < 0 || install > quick {
		t.Errorf("README.md: want the install command (at %d) before the quick start (at %d)", install, quick)
	}
	for _, cmd := range []string{"make demo", "make test"} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cmd) + `\s+#`).MatchString(md) {
			t.Errorf("README.md does not show %q as a command", cmd)
		}
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Errorf(".ci/run does not run the README's test command, make test:\n%s", ci)
	}
}
