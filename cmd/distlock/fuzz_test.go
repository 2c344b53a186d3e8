package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
)

// urlSeeds cover every scheme this binary registers, well-formed and not.
var urlSeeds = []string{
	"", " ", "mem://", "mem://jobs", "MEM://x",
	"redis://localhost:6379/0", "redis://user:pass@localhost:6379/1", "redis://:pass@h:1",
	"redis://h:port/0", "redis://[::1]:6379/0", "redis://[::1", "redis://h:6379/notadb",
	"redis://h:6379/0?prefix=app:&dial_timeout=1s", "redis://h:6379/0?pool_size=x",
	"rediss://h:6380/0", "redis+sentinel://a:26379,b:26379/mymaster", "redis+sentinel://a:26379/",
	"redis+sentinel://a:1/m/x", "redis+cluster://a:7000,b:7001", "redis+cluster://a:7000/3",
	"redis+cluster://", "redis+cluster://a,b", "redlock://a:1,b:2,c:3", "redlock://a:1?node_timeout=x",
	"redlock://", "redlock://a:1,a:1/2?prefix=p",
	"zk://a:2181,b:2181/locks?session_timeout=5s", "zk://a:1?colour=x", "zk://", "zk://a:1,,b:2",
	"localhost:6379", "//user:secret@host:1", "zk://h", "%", "redis://%zz", "redis://h:99999/0",
	"redis://h:1/0#frag", "\x00://", "redis://user:p%40ss@h:1/0",
}

// FuzzOpen feeds URLs to distlock.Open with every backend of this binary
// registered, and to the command's own URL check. Neither may panic, and
// the check must never reject a URL that Open accepts. The openers are
// lazy, or bounded by the context (zk:// waits for a session).
func FuzzOpen(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		msg := checkURL(raw)
		c, err := distlock.Open(ctx, raw)
		if err == nil {
			if msg != "" {
				t.Errorf("checkURL rejects %q (%s), but Open accepts it", raw, msg)
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close after Open(%q): %v", raw, err)
			}
		}
		if msg != "" && strings.Contains(msg, "\n") {
			t.Errorf("message for %q is not one line: %q", raw, msg)
		}
		if u, perr := url.Parse(raw); perr == nil && u.User != nil {
			// A password that occurs once in the URL must not be echoed.
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Count(raw, pw) == 1 && strings.Contains(msg, pw) {
				t.Errorf("message for %q shows the password: %s", raw, msg)
			}
		}
	})
}

// FuzzRunArgs feeds command lines, NUL-separated, to the parser of
// `distlock run`. It must not panic, must report a bad line in one line
// with status 64, and must accept only options that can work.
func FuzzRunArgs(f *testing.F) {
	for _, s := range []string{
		"--url\x00mem://\x00--key\x00k\x00--\x00true",
		"--key\x00k\x00--wait\x000\x00--\x00sh\x00-c\x00exit 3",
		"--key\x00k\x00--wait\x00forever\x00--ttl\x001s\x00--grace\x000s\x00cmd",
		"--key\x00k\x00--wait\x00-1s\x00cmd",
		"--key\x00k\x00--ttl\x001ns\x00cmd",
		"--key\x00\x00cmd",
		"--url\x00redis://h:x\x00--key\x00k\x00cmd",
		"-h", "--help\x00x", "--", "--key=k\x00--wait=2m\x00--\x00--",
		"--url=redis+cluster://a:1,b:2\x00--key=k\x00--\x00cmd",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		var stdout, stderr strings.Builder
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
			getenv: func(string) string { return "mem://" }}
		o, code, done := c.parseRun(args)
		if done {
			switch code {
			case exitOK:
				if !strings.Contains(stdout.String(), "Usage:") {
					t.Errorf("%q: status 0 without help", args)
				}
			case exitUsage:
				if s := stderr.String(); strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
					t.Errorf("%q: usage error is not one line: %q", args, s)
				}
			default:
				t.Errorf("%q: status %d", args, code)
			}
			return
		}
		switch {
		case o.key == "" || len(o.key) > distlock.MaxKeyLen:
			t.Errorf("%q: accepted key %q", args, o.key)
		case len(o.argv) == 0 || o.argv[0] == "":
			t.Errorf("%q: accepted CMD %q", args, o.argv)
		case o.ttl < distlock.MinTTL || o.grace < 0 || (!o.wait.forever && o.wait.d < 0):
			t.Errorf("%q: accepted ttl %v, grace %v, wait %v", args, o.ttl, o.grace, o.wait.String())
		case checkURL(o.url) != "":
			t.Errorf("%q: accepted URL %q", args, o.url)
		case stderr.Len() > 0:
			t.Errorf("%q: accepted, but wrote %q", args, stderr.String())
		}
	})
}

// FuzzStatusArgs does the same for `distlock status`, whose flags may
// come before or after the keys.
func FuzzStatusArgs(f *testing.F) {
	for _, s := range []string{
		"k", "k1\x00k2\x00--json", "--json\x00k", "--url\x00mem://\x00k", "--\x00--json",
		"k\x00--\x00-x", "--url", "\x00", "-h", "k\x00--yaml", "--json=false\x00k\x00--url=nope://",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		var stdout, stderr strings.Builder
		c := &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
			getenv: func(string) string { return "mem://" }}
		o, code, done := c.parseStatus(args)
		if done {
			if code == exitUsage {
				if s := stderr.String(); strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
					t.Errorf("%q: usage error is not one line: %q", args, s)
				}
			} else if code != exitOK {
				t.Errorf("%q: status %d", args, code)
			}
			return
		}
		if len(o.keys) == 0 || checkURL(o.url) != "" || stderr.Len() > 0 {
			t.Errorf("%q: accepted %+v, wrote %q", args, o, stderr.String())
		}
		for _, k := range o.keys {
			if k == "" || len(k) > distlock.MaxKeyLen {
				t.Errorf("%q: accepted key %q", args, k)
			}
		}
	})
}

// Flag values round-trip through the --wait parser.
func TestWaitFlag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"forever": "forever", "FOREVER": "forever", "0": "0s", "1m30s": "1m30s"} {
		var w waitFlag
		if err := w.Set(in); err != nil || w.String() != want {
			t.Errorf("Set(%q): %v, String() = %q, want %q", in, err, w.String(), want)
		}
	}
	for _, in := range []string{"", "-1s", "soon", "1", "inf"} {
		var w waitFlag
		if err := w.Set(in); err == nil {
			t.Errorf("Set(%q) accepted: %v", in, w.String())
		}
	}
	var w waitFlag
	if w.String() != "0s" {
		t.Errorf("zero value String() = %q", w.String())
	}
}
