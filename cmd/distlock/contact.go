package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/redlock"
)

// tryUntilAnswered calls m.TryLock until the backend answers — the lock
// is taken, or it is held elsewhere — or until deadline, pausing briefly
// between failures. A first connection may well fail: a cold client
// dialling under load, or a Redlock node slower than its timeout. An error
// that shows the backend can never work as configured (see configProblem)
// ends the tries at once. Every attempt, and the clean-up after a failed
// one, ends by deadline.
func tryUntilAnswered(ctx context.Context, m locker, b *backend, deadline time.Time) (*distlock.Lock, error) {
	ctx, stop := watchTLS(ctx, b.url)
	defer stop()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	defer b.limitTo(ctx)()
	pause := 50 * time.Millisecond
	var telling error // the latest error that says more than "time ran out"
	for {
		l, err := m.TryLock(ctx)
		if err == nil || errors.Is(err, distlock.ErrNotObtained) || errors.Is(err, driver.ErrKindMismatch) || configProblem(err) != "" ||
			errors.Is(err, distlock.ErrInvalidKey) || errors.Is(err, distlock.ErrInvalidTTL) || errors.Is(err, distlock.ErrInvalidArgument) ||
			errors.Is(err, errors.ErrUnsupported) || errors.Is(err, distlock.ErrInvalidBackend) {
			return l, err
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			telling = err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			switch cause := context.Cause(ctx); {
			case configProblem(cause) != "":
				return nil, cause
			case errors.Is(cause, context.DeadlineExceeded) && telling != nil:
				// The last attempt was cut short: an earlier one
				// tells why the backend does not answer.
				return nil, telling
			}
			return nil, err
		}
		pause = min(2*pause, time.Second)
	}
}

// configProblem returns what to check when err shows that the backend can
// never work as configured, however often it is tried: credentials that
// the server refuses, a database it does not have, TLS that does not match
// the server. It returns "" for errors that may pass, such as a refused
// connection or a timeout.
func configProblem(err error) string {
	switch e := err.(type) {
	case nil:
		return ""
	case *redlock.QuorumError:
		return quorumProblem(e)
	case tlsMismatchError:
		return e.hint()
	case redis.Error:
		if hint := redisProblem(e.Error()); hint != "" {
			return hint
		}
	case tls.RecordHeaderError:
		return "the server does not speak TLS: use redis:// instead of rediss://"
	case *tls.CertificateVerificationError, x509.UnknownAuthorityError, x509.HostnameError, x509.CertificateInvalidError:
		return "the server's TLS certificate was not accepted"
	case *net.OpError:
		// crypto/tls reports an alert from the peer as this operation:
		// the server refused the handshake (protocol version, ciphers).
		if e.Op == "remote error" {
			return "the server refused the TLS handshake"
		}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return configProblem(u.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if hint := configProblem(e); hint != "" {
				return hint
			}
		}
	}
	return ""
}

// quorumProblem is configProblem for Redlock: a configuration problem on
// some nodes matters only if the other nodes cannot make a quorum.
func quorumProblem(e *redlock.QuorumError) string {
	bad, hint := 0, ""
	for _, n := range e.Nodes {
		if n.Outcome != redlock.Failed {
			continue
		}
		if h := configProblem(n.Err); h != "" {
			bad, hint = bad+1, h
		}
	}
	if len(e.Nodes)-bad >= e.Quorum {
		return ""
	}
	return hint
}

// redisProblem returns what to check for a Redis error reply that no retry
// can change, or "".
func redisProblem(msg string) string {
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"),
		strings.HasPrefix(msg, "ERR invalid password"), strings.HasPrefix(msg, "ERR AUTH"):
		return "check the user and password in the URL"
	case strings.HasPrefix(msg, "NOPERM"):
		return "the user lacks permissions that distlock needs: check its ACL"
	case strings.HasPrefix(msg, "ERR DB index is out of range"), strings.HasPrefix(msg, "ERR invalid DB index"):
		return "the server has no such database: check the database number in the URL"
	case strings.HasPrefix(msg, "ERR This instance has cluster support disabled"):
		return "the server is not part of a cluster: use redis://"
	case strings.HasPrefix(msg, "MOVED "):
		return "the server is part of a cluster: use redis+cluster://"
	}
	return ""
}

// tlsCheckDelay is how long a first contact may go unanswered before the
// command checks whether the server speaks TLS when the URL says it does
// not, or the other way round. A healthy server answers well within it, so
// it is never asked.
const tlsCheckDelay = 300 * time.Millisecond

// tlsMismatchError reports a server that speaks plain text when the URL
// asks for TLS (rediss://), or TLS when it does not (redis://). The client
// cannot tell the first from a server that hangs: a plain-text server waits
// for the end of a command line, and the client for the reply to its TLS
// handshake.
type tlsMismatchError struct {
	addr    string
	withTLS bool // the server speaks TLS
}

func (e tlsMismatchError) Error() string {
	if e.withTLS {
		return fmt.Sprintf("%s answers with TLS", e.addr)
	}
	return fmt.Sprintf("%s answers in plain text, not TLS", e.addr)
}

func (e tlsMismatchError) hint() string {
	if e.withTLS {
		return "use rediss:// instead of redis://"
	}
	return "use redis:// instead of rediss://"
}

// watchTLS returns a context derived from ctx that is cancelled with a
// tlsMismatchError if the server at rawURL (redis:// or rediss://), when it
// has not answered within tlsCheckDelay, turns out to speak TLS where the
// URL does not ask for it, or the other way round. stop ends the watch.
func watchTLS(ctx context.Context, rawURL string) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ctx, func() { cancel(nil) }
	}
	var mismatch func(context.Context, string) bool
	switch strings.ToLower(u.Scheme) {
	case "rediss":
		mismatch = func(ctx context.Context, addr string) bool {
			line, err := plainReply(ctx, addr, time.Second)
			return err == nil && isSimpleReply(line)
		}
	case "redis":
		mismatch = speaksTLS
	default:
		return ctx, func() { cancel(nil) }
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "6379")
	}
	t := time.AfterFunc(tlsCheckDelay, func() {
		if mismatch(ctx, addr) {
			cancel(tlsMismatchError{addr: addr, withTLS: strings.EqualFold(u.Scheme, "redis")})
		}
	})
	return ctx, func() {
		t.Stop()
		cancel(nil)
	}
}

// speaksTLS reports whether the server at addr answers a TLS handshake,
// with its certificate or with an alert.
func speaksTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	// The certificate is not checked: the handshake only tells whether the
	// server speaks TLS, and nothing is sent over the connection.
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "remote error"
	}
	conn.Close()
	return true
}

// plainReply sends PING to addr in the inline form of the Redis protocol,
// without TLS or a client library, and returns the first line of the reply.
func plainReply(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	defer context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })()
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return "", err
	}
	// A server that is not Redis may send anything: read a line at most.
	return bufio.NewReader(io.LimitReader(conn, 512)).ReadString('\n')
}

// isSimpleReply reports whether line is a Redis status or error reply,
// such as "+PONG\r\n" or "-NOAUTH Authentication required.\r\n".
func isSimpleReply(line string) bool {
	return len(line) >= 3 && (line[0] == '+' || line[0] == '-') && strings.HasSuffix(line, "\r\n")
}
