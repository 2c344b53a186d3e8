//go:build unix

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/internal/launch"
	"github.com/distlock-go/distlock/internal/testserver"
)

// A backend that can never work as configured is reported at once, with
// the reason, instead of being retried until the first contact gives up.
func TestRunConfigErrorsFailAtOnce(t *testing.T) {
	t.Parallel()
	locked := startRedisWithPassword(t, "s3cret")
	open := testserver.StartRedis(t)
	var nodes []string
	for range 3 {
		nodes = append(nodes, startRedisWithPassword(t, "s3cret").Addr())
	}
	withTLS := startTLSRedis(t)
	tests := []struct {
		name string
		args []string
		want []string // in the one line on stderr
	}{
		{"wrong password", []string{"--url", "redis://:wrong@" + locked.Addr() + "/0"}, []string{"WRONGPASS", "password"}},
		{"no password", []string{"--url", "redis://" + locked.Addr() + "/0"}, []string{"NOAUTH", "password"}},
		{"database out of range", []string{"--url", "redis://" + open.Addr() + "/99"}, []string{"DB index", "database"}},
		{"TLS to a plain server", []string{"--url", "rediss://" + open.Addr() + "/0"}, []string{"TLS", "redis://"}},
		{"TLS to a plain server, --wait 2s", []string{"--url", "rediss://" + open.Addr() + "/0", "--wait", "2s"}, []string{"TLS", "redis://"}},
		{"TLS certificate not accepted", []string{"--url", "rediss://" + withTLS + "/0"}, []string{"certificate"}},
		{"plain text to a TLS server", []string{"--url", "redis://" + withTLS + "/0"}, []string{"TLS", "rediss://"}},
		{"Redlock, wrong password", []string{"--url", "redlock://:wrong@" + strings.Join(nodes, ",")}, []string{"WRONGPASS", "password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, append(append([]string{"run", "--key", "k"}, tt.args...), append([]string{"--"}, child("exit", "0")...)...)...)
			wantCode(t, r, exitUnavailable)
			for _, want := range tt.want {
				wantOneLine(t, r.stderr, want)
			}
			// At once: well below the 5s that a transient failure is
			// retried for (before the fix: 5s, and 30s for TLS).
			if r.took > 3*time.Second {
				t.Errorf("took %v", r.took)
			}
		})
	}
	for _, u := range []string{"redis://:wrong@" + locked.Addr() + "/0", "rediss://" + open.Addr() + "/0", "redis://" + withTLS + "/0"} {
		t.Run("status "+u, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, "status", "--url", u, "k")
			wantCode(t, r, exitUnavailable)
			if r.took > 3*time.Second {
				t.Errorf("took %v", r.took)
			}
		})
	}
}

// startTLSRedis starts a redis-server that also listens with TLS, with a
// certificate that no client trusts, and returns the TLS address.
func startTLSRedis(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "distlock test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	testserver.StartRedis(t, testserver.WithArgs("--tls-port", strconv.Itoa(port),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", certFile, "--tls-auth-clients", "no"))
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// A backend that does not answer ends run with 69 within 5s, or --wait
// if that is shorter, however long the client library would go on.
func TestRunUnavailableWithinWait(t *testing.T) {
	t.Parallel()
	paused := testserver.StartRedis(t)
	paused.Pause(t)
	t.Cleanup(func() { paused.Resume(t) })
	port, err := launch.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Sprintf("127.0.0.1:%d", port)
	tests := []struct {
		name  string
		addr  string
		wait  string
		bound time.Duration // generous; before the fix: 10s, 10s, 3.5s
	}{
		{"paused server", paused.Addr(), "forever", 8 * time.Second},
		{"paused server, --wait 2s", paused.Addr(), "2s", 4 * time.Second},
		{"refused, --wait 1s", refused, "1s", 2500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runBin(t, append([]string{"run", "--url", "redis://" + tt.addr + "/0", "--key", "k", "--wait", tt.wait, "--"}, child("exit", "0")...)...)
			wantCode(t, r, exitUnavailable)
			wantOneLine(t, r.stderr, "backend unavailable")
			if r.took > tt.bound {
				t.Errorf("took %v, want at most %v", r.took, tt.bound)
			}
		})
	}
}

// After the lease is lost to a hung server, run exits soon after CMD does:
// it does not wait on a release that cannot succeed.
func TestRunExitFollowsChildAfterLostLease(t *testing.T) {
	t.Parallel()
	srv, u := startRedis(t)
	holder, signals := holdLock(t, u, "k", "--ttl", "1s", "--grace", "10s")
	srv.Pause(t)
	t.Cleanup(func() { srv.Resume(t) })
	waitFile(t, signals, 30*time.Second) // CMD got SIGTERM and exits
	childDone := time.Now()
	r := holder.wait(t, 60*time.Second)
	wantCode(t, r, exitLeaseLost)
	// Before the fix: about 5s, waiting on the release.
	if d := time.Since(childDone); d > 2*time.Second {
		t.Errorf("run exited %v after CMD", d)
	}
}
