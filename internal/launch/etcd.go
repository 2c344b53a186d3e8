package launch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoEtcd is returned by [StartEtcd] when there is no etcd server program
// to run: none in $DISTLOCK_ETCD, and none could be built.
var ErrNoEtcd = errors.New("launch: no etcd server")

// etcdReadyTimeout bounds a member's start, building aside.
const etcdReadyTimeout = time.Minute

// EtcdBinary returns the etcd server program: $DISTLOCK_ETCD if set, else
// the repository's etcdlock/internal/etcdserver/cmd (a module of its own on
// etcd's embed package, so that etcd's server is nobody's dependency),
// built with go build once per version of its sources and of Go and kept
// in the user cache directory. Building needs this source tree, the Go
// toolchain and the module proxy (or a filled module cache) the first
// time.
func EtcdBinary() (string, error) {
	etcdBuilt.once.Do(func() { etcdBuilt.path, etcdBuilt.err = buildEtcd() })
	return etcdBuilt.path, etcdBuilt.err
}

var etcdBuilt struct {
	once sync.Once
	path string
	err  error
}

func buildEtcd() (string, error) {
	if bin := os.Getenv("DISTLOCK_ETCD"); bin != "" {
		return bin, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("%w: cannot find the source tree", ErrNoEtcd)
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "etcdlock", "internal", "etcdserver", "cmd")
	// The binary is named after its sources: an edit, or a new etcd in
	// go.mod, builds a new one.
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("%w: the server program's sources (set DISTLOCK_ETCD to an etcd server built from them): %v", ErrNoEtcd, err)
		}
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	cache = filepath.Join(cache, "distlock")
	path := filepath.Join(cache, fmt.Sprintf("etcdserver-%x-%s-%s_%s", h.Sum(nil)[:8], runtime.Version(), runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// Build under a temporary name and rename: concurrent builders never
	// run a half-written file.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, ".")
	cmd.Dir = dir
	// The program's module stands alone: no go.work may pull it into
	// another build list.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("%w: go build in %s: %v\n%s", ErrNoEtcd, dir, err, bytes.TrimSpace(out))
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}

// Etcd is one etcd member on fixed ports of 127.0.0.1 with its data in a
// temporary directory. Its methods are safe for concurrent use; they act
// on the current process, which Restart replaces.
type Etcd struct {
	bin     string
	name    string
	dir     string
	client  int // port
	peer    int // port
	initial string

	mu   sync.Mutex
	proc *Proc
}

// StartEtcd starts n members that form one cluster (EtcdBinary's program,
// with a 50ms heartbeat and a 500ms election timeout) and returns once
// every one of them serves clients. The caller must Close each.
func StartEtcd(ctx context.Context, n int) (ms []*Etcd, err error) {
	bin, err := EtcdBinary()
	if err != nil {
		return nil, err
	}
	// A port found free may be taken by another process before the member
	// binds it (tests start servers in parallel): start again elsewhere.
	for attempt := 1; ; attempt++ {
		ms, err = startEtcd(ctx, bin, n)
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			return ms, err
		}
	}
}

// startEtcd makes one attempt of StartEtcd, on ports found free.
func startEtcd(ctx context.Context, bin string, n int) (ms []*Etcd, err error) {
	ports, err := FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			for _, m := range ms {
				_ = m.Close()
			}
			ms = nil
		}
	}()
	var initial []string
	for i := range n {
		dir, err := os.MkdirTemp("", "distlock-etcd-")
		if err != nil {
			return ms, err
		}
		m := &Etcd{bin: bin, name: fmt.Sprintf("m%d", i), dir: dir, client: ports[2*i], peer: ports[2*i+1]}
		initial = append(initial, m.name+"="+m.peerURL())
		ms = append(ms, m)
	}
	for _, m := range ms {
		m.initial = strings.Join(initial, ",")
	}
	// A member of a new cluster is ready once a leader is elected, which
	// needs the others: start them all, then wait.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { errs[i] = m.start(ctx) })
	}
	wg.Wait()
	return ms, errors.Join(errs...)
}

// Addr returns the member's client address, "127.0.0.1:port".
func (m *Etcd) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.client)) }

func (m *Etcd) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(m.peer) }

func (m *Etcd) current() *Proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// Pause stops the member (SIGSTOP): it neither answers nor closes its
// connections, like a member that hangs, until Resume.
func (m *Etcd) Pause() error { return m.current().Pause() }

// Resume continues a paused member.
func (m *Etcd) Resume() error { return m.current().Resume() }

// Kill ends the member at once (SIGKILL) and waits until it is gone. Its
// data stays, for Restart.
func (m *Etcd) Kill() error {
	if p := m.current(); p != nil && !p.Kill(exitTimeout) {
		return fmt.Errorf("launch: etcd member %s did not exit %v after SIGKILL", m.name, exitTimeout)
	}
	return nil
}

// Restart kills the member if it runs and starts it again on its data.
func (m *Etcd) Restart(ctx context.Context) error {
	if err := m.Kill(); err != nil {
		return err
	}
	return m.start(ctx)
}

// Close kills the member and removes its data.
func (m *Etcd) Close() error {
	err := m.Kill()
	_ = os.RemoveAll(m.dir)
	return err
}

// start starts the member and waits until it serves clients: the program
// prints "ready" then.
func (m *Etcd) start(ctx context.Context) error {
	state := "new"
	if _, err := os.Stat(filepath.Join(m.dir, "data", "member")); err == nil {
		state = "existing"
	}
	logf, err := os.OpenFile(filepath.Join(m.dir, "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin,
		"-name", m.name,
		"-data-dir", filepath.Join(m.dir, "data"),
		"-client-url", "http://"+m.Addr(),
		"-peer-url", m.peerURL(),
		"-initial-cluster", m.initial,
		"-initial-cluster-state", state,
	)
	cmd.Stdout, cmd.Stderr = pw, logf
	p, err := Start(cmd)
	pw.Close() // the child has its own
	if err != nil {
		pr.Close()
		return fmt.Errorf("launch: starting etcd member %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.proc = p
	m.mu.Unlock()
	ready := make(chan struct{})
	go func() {
		// Read until the child exits, so that it never writes to a
		// closed pipe.
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				break
			}
		}
		for sc.Scan() { // drain until the child exits
		}
	}()
	t := time.NewTimer(etcdReadyTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return nil
	case <-p.Done():
		tail := m.LogTail()
		if strings.Contains(tail, "address already in use") {
			return fmt.Errorf("launch: etcd member %s: %w:\n%s", m.name, errAddrInUse, tail)
		}
		return fmt.Errorf("launch: etcd member %s exited before it was ready:\n%s", m.name, tail)
	case <-ctx.Done():
		_ = m.Kill()
		return fmt.Errorf("launch: etcd member %s: %w", m.name, ctx.Err())
	case <-t.C:
		_ = m.Kill()
		return fmt.Errorf("launch: etcd member %s not ready after %v:\n%s", m.name, etcdReadyTimeout, m.LogTail())
	}
}

// LogTail returns the end of the member's log, for error messages.
func (m *Etcd) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
