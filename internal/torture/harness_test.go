package torture

import (
	"context"
	"flag"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// fakeWorkerEnv makes the test binary play a worker that only says hello
// and waits for the stop.
const fakeWorkerEnv = "TORTURE_TEST_FAKE_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(fakeWorkerEnv) == "1" {
		os.Exit(fakeWorker(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeWorker(args []string) int {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	var wc WorkerConfig
	fs.StringVar(&wc.Harness, "harness", "", "")
	fs.IntVar(&wc.Slot, "slot", 0, "")
	fs.IntVar(&wc.Inc, "inc", 0, "")
	fs.String("key", "", "")
	fs.Duration("ttl", 0, "")
	fs.Uint64("seed", 0, "")
	fs.Int("slow", 0, "")
	if fs.Parse(args) != nil {
		return 2
	}
	conn, err := net.Dial("tcp", wc.Harness)
	if err != nil {
		return 1
	}
	defer conn.Close()
	out := &lineWriter{w: conn}
	if out.send(msg{Kind: msgHello, Slot: wc.Slot, Inc: wc.Inc, Secret: os.Getenv(SecretEnv)}) != nil {
		return 1
	}
	lr := newLineReader(conn)
	for {
		var r reply
		if err := lr.next(&r); err != nil || r.Stop {
			return 0
		}
	}
}

// TestHelloBeforeSpawnReturns: a worker may connect before the harness has
// recorded its process; the harness must wait for that, not fail.
func TestHelloBeforeSpawnReturns(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	afterStart = func() { time.Sleep(300 * time.Millisecond) }
	defer func() { afterStart = nil }()
	cfg := Config{
		URL: "redis://127.0.0.1:1/0", Workers: 2, Duration: 200 * time.Millisecond,
		TTL: 100 * time.Millisecond, Slack: 100 * time.Millisecond,
		Command: func(args []string) *exec.Cmd {
			cmd := exec.Command(exe, args...)
			cmd.Env = append(os.Environ(), fakeWorkerEnv+"=1")
			return cmd
		},
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Operations.Processes != 2 {
		t.Fatalf("%d worker processes recorded, want 2", rep.Operations.Processes)
	}
}
