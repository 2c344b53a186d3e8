package redislock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock-go/distlock"
	"github.com/distlock-go/distlock/internal/redisnode"
)

// plainProbeAfter is how long a TLS handshake may stall before the server
// is checked for speaking plain text. A TLS server answers a ClientHello
// within a round trip; a plain Redis server waits for the end of a command
// line that never comes, so the handshake would only end at the deadline.
const plainProbeAfter = 200 * time.Millisecond

// errPlainText is wrapped by the error of a TLS dial to a plain-text server.
var errPlainText = errors.New("the server answers in plain text, not TLS: use redis://, not rediss://")

// dialTLS returns a go-redis dialer for TLS connections. Unlike go-redis'
// own, it bounds the handshake by the caller's context (and dialTimeout),
// not by dialTimeout alone, and it reports a plain-text server as such.
func dialTLS(cfg *tls.Config, dialTimeout time.Duration) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dialTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, dialTimeout)
			defer cancel()
		}
		d := net.Dialer{KeepAlive: 30 * time.Second}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conn := tls.Client(raw, cfg)
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 1)
		go func() { done <- conn.HandshakeContext(hctx) }()
		probe := time.NewTimer(plainProbeAfter)
		defer probe.Stop()
		select {
		case err = <-done:
		case <-probe.C:
			if plainText(ctx, &d, network, addr) {
				stop()
				<-done
				_ = raw.Close()
				return nil, fmt.Errorf("redislock: TLS handshake with %s: %w", addr, errPlainText)
			}
			err = <-done
		}
		if err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("redislock: TLS handshake with %s: %w", addr, err)
		}
		return conn, nil
	}
}

// plainText reports whether the server at addr answers a plain-text PING
// with a RESP reply ("+PONG", or an error such as "-NOAUTH"). A TLS server
// answers with an alert or closes the connection.
func plainText(ctx context.Context, d *net.Dialer, network, addr string) bool {
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return false
	}
	defer c.Close()
	deadline := time.Now().Add(time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return false
	}
	return b[0] == '+' || b[0] == '-'
}

// setupReplies begin the server's replies that refuse the client as it is
// set up: its credentials, or the database it asks for.
var setupReplies = []string{"WRONGPASS", "NOAUTH", "ERR invalid password", "ERR AUTH", "ERR DB index is out of range", "ERR invalid DB index"}

// misconfigured wraps err with distlock.ErrInvalidBackend when it shows
// that the client cannot work as set up, however often it tries: the
// server refuses its credentials or has no such database, or TLS does not
// match the server. No request ran then; distlock fails the call at once
// instead of retrying it until its context ends, and does not repeat the
// release of an attempt that took nothing. So is a restart guard that the
// user's ACL does not let read INFO: the script changed nothing either.
func misconfigured(err error) error {
	if err == nil || errors.Is(err, distlock.ErrInvalidBackend) {
		return err
	}
	var (
		reply  redis.Error
		cert   *tls.CertificateVerificationError
		header tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, errPlainText), errors.As(err, &cert), errors.As(err, &header):
	case redisnode.BlindGuard(err):
		return fmt.Errorf("%w: %w; grant the user +info, or turn the guard off (WithoutRestartGuard) where the servers never lose data", distlock.ErrInvalidBackend, err)
	case errors.As(err, &reply) && slices.ContainsFunc(setupReplies, func(p string) bool { return strings.HasPrefix(reply.Error(), p) }):
	default:
		return err
	}
	return fmt.Errorf("%w: %w", distlock.ErrInvalidBackend, err)
}
