package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/testserver"
)

func TestStatusTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []keyStatus{
		newKeyStatus(distlock.Info{Key: "orders:42", Held: true, Token: 17, TTL: 29*time.Second + 40*time.Millisecond, Meta: map[string]string{
			"host": "web-1", "pid": "4242", "since": "1893553385000", "cmd": "backup.sh",
		}}),
		// What a holder recorded must not be able to forge another row.
		newKeyStatus(distlock.Info{Key: "evil", Held: true, Token: 3, TTL: time.Second, Meta: map[string]string{
			"host": "h\nfake  held  99  1s  host=x", "x y": "z\tw",
		}}),
		newKeyStatus(distlock.Info{Key: "free key", Token: 5}),
	}
	var b strings.Builder
	if err := writeStatusTable(&b, rows, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), b.String())
	}
	for i, want := range []string{
		"KEY STATE TOKEN TTL HOLDER", "orders:42 held 17 29s host=web-1 pid=4242 since=", "evil held 3 1s", `"free key" free 5 - -`,
	} {
		if got := strings.Join(strings.Fields(lines[i]), " "); !strings.HasPrefix(got, want) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "cmd=backup.sh") || !strings.Contains(lines[1], "ago)") {
		t.Errorf("holder of orders:42: %q", lines[1])
	}
	if !strings.Contains(lines[2], `host="h\nfake  held  99  1s  host=x"`) || !strings.Contains(lines[2], `"x y"="z\tw"`) {
		t.Errorf("holder of evil is not quoted: %q", lines[2])
	}
	if rows[0].Since != "2030-01-02T03:03:05Z" {
		t.Errorf("since = %q", rows[0].Since)
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"1893553385000":             "2030-01-02T03:03:05Z", // milliseconds
		"1893553385":                "2030-01-02T03:03:05Z", // seconds
		"2030-01-02T03:03:05Z":      "2030-01-02T03:03:05Z",
		"2030-01-02T04:03:05+01:00": "2030-01-02T03:03:05Z",
	} {
		got, ok := parseSince(in)
		if !ok || got.UTC().Format(time.RFC3339) != want {
			t.Errorf("parseSince(%q) = %v, %v; want %s", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "yesterday", "99999999999999999999"} {
		if got, ok := parseSince(in); ok {
			t.Errorf("parseSince(%q) = %v, want no time", in, got)
		}
	}
}

// TestStatusWarnings: a warning about the deployment, which every key
// carries, is one line; one that only some keys have names them.
func TestStatusWarnings(t *testing.T) {
	t.Parallel()
	const risk = "maxmemory-policy allkeys-lru: when memory is full, Redis may evict held locks"
	rows := []keyStatus{
		newKeyStatus(distlock.Info{Key: "a", Warnings: []string{risk}}),
		newKeyStatus(distlock.Info{Key: "b c", Warnings: []string{risk, "restart guard: new locks are granted in 12s"}}),
	}
	var b strings.Builder
	writeWarnings(&b, "status", rows)
	want := "distlock status: warning: " + risk + "\n" +
		`distlock status: warning: "b c": restart guard: new locks are granted in 12s` + "\n"
	if b.String() != want {
		t.Errorf("warnings:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	writeWarnings(&b, "status", []keyStatus{newKeyStatus(distlock.Info{Key: "a"})})
	if b.Len() != 0 {
		t.Errorf("warnings without any: %q", b.String())
	}
}

// TestStatusWarnsOfDataRisks: against a cache server (allkeys-lru, no
// append-only file), status says so in one line on stderr, however many
// keys it shows, and in each key's JSON object.
func TestStatusWarnsOfDataRisks(t *testing.T) {
	t.Parallel()
	srv := testserver.StartRedis(t, testserver.WithArgs("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"))
	u := "redis://" + srv.Addr() + "/0"
	r := runBin(t, "status", "--url", u, "a", "b", "c")
	wantCode(t, r, exitFree)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "allkeys-lru") || !strings.Contains(lines[0], "no append-only file") {
		t.Errorf("stderr:\n%s\nwant one warning line naming allkeys-lru and the missing append-only file", r.stderr)
	}
	r = runBin(t, "status", "--url", u, "--json", "a")
	var got []keyStatus
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].Warnings) != 1 || !strings.Contains(got[0].Warnings[0], "allkeys-lru") {
		t.Errorf("JSON: %s", r.stdout)
	}

	safe := testserver.StartRedis(t, testserver.WithPersistence())
	r = runBin(t, "status", "--url", "redis://"+safe.Addr()+"/0", "a")
	if strings.TrimSpace(r.stderr) != "" {
		t.Errorf("stderr with noeviction and appendfsync always: %q; want no warning", r.stderr)
	}
}
