package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// ErrNil is returned by Do for a nil reply (a missing key, a nil array).
var ErrNil = errors.New("testserver: nil reply")

// ReplyError is an error reply sent by the server, such as
// "ERR unknown command" or "MOVED 3999 127.0.0.1:7001". Network and
// protocol failures are reported as other error types, so a test can tell
// "the server said no" from "the server could not be reached".
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// Do sends one command to the server at addr on a new connection and returns
// the reply rendered as a string: simple and bulk strings as they are,
// integers in decimal, arrays as their elements joined by "\n" (nested
// arrays flattened, nil elements as empty lines, error elements as their
// message). A nil reply returns ErrNil and an error reply a [ReplyError].
// The timeout bounds the whole exchange, dial included; a timeout is
// reported as an error wrapping a net.Error whose Timeout method is true.
func Do(addr string, timeout time.Duration, args ...string) (string, error) {
	rs, err := roundTrip(addr, timeout, args)
	if err != nil {
		return "", err
	}
	return rs[0].render()
}

// reply is one decoded RESP2 value.
type reply struct {
	kind  byte // '+', '-', ':', '$' or '*'
	str   string
	elems []reply
	null  bool
}

func (r reply) render() (string, error) {
	switch {
	case r.null:
		return "", ErrNil
	case r.kind == '-':
		return "", ReplyError(r.str)
	case r.kind == '*':
		return strings.Join(r.flatten(nil), "\n"), nil
	default:
		return r.str, nil
	}
}

func (r reply) flatten(out []string) []string {
	if r.kind != '*' || r.null {
		return append(out, r.str)
	}
	for _, e := range r.elems {
		out = e.flatten(out)
	}
	return out
}

// err returns the reply's error, if it is an error reply, so that callers
// which walk structured replies need not render them.
func (r reply) err() error {
	if r.kind == '-' {
		return ReplyError(r.str)
	}
	return nil
}

// roundTrip sends the commands pipelined on one fresh connection and reads
// one reply per command. A fresh connection per call keeps the helper
// correct across kills and restarts without reconnect logic.
func roundTrip(addr string, timeout time.Duration, cmds ...[]string) ([]reply, error) {
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("testserver: dial %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("testserver: %s: %w", addr, err)
	}
	var buf []byte
	for _, args := range cmds {
		buf = appendCommand(buf, args)
	}
	if _, err := conn.Write(buf); err != nil {
		return nil, fmt.Errorf("testserver: write to %s: %w", addr, err)
	}
	br := bufio.NewReader(conn)
	out := make([]reply, 0, len(cmds))
	for range cmds {
		r, err := readReply(br)
		if err != nil {
			return nil, fmt.Errorf("testserver: read from %s: %w", addr, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func appendCommand(b []byte, args []string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// maxBulk bounds the allocation a corrupt length prefix can cause.
const maxBulk = 512 << 20

func readReply(br *bufio.Reader) (reply, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return reply{}, fmt.Errorf("malformed RESP line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', '-':
		return reply{kind: kind, str: body}, nil
	case ':':
		if _, err := strconv.ParseInt(body, 10, 64); err != nil {
			return reply{}, fmt.Errorf("malformed RESP integer %q", body)
		}
		return reply{kind: kind, str: body}, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulk {
			return reply{}, fmt.Errorf("malformed RESP bulk length %q", body)
		}
		if n == -1 {
			return reply{kind: kind, null: true}, nil
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(br, data); err != nil {
			return reply{}, err
		}
		if data[n] != '\r' || data[n+1] != '\n' {
			return reply{}, errors.New("malformed RESP bulk string terminator")
		}
		return reply{kind: kind, str: string(data[:n])}, nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulk {
			return reply{}, fmt.Errorf("malformed RESP array length %q", body)
		}
		if n == -1 {
			return reply{kind: kind, null: true}, nil
		}
		r := reply{kind: kind, elems: make([]reply, 0, min(n, 1024))}
		for range n {
			e, err := readReply(br)
			if err != nil {
				return reply{}, err
			}
			r.elems = append(r.elems, e)
		}
		return r, nil
	default:
		return reply{}, fmt.Errorf("unsupported RESP type %q", kind)
	}
}

// infoField returns the value of key in an INFO reply, or "".
func infoField(info, key string) string {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok && k == key {
			return v
		}
	}
	return ""
}
