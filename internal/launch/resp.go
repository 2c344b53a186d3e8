package launch

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

// ErrNil is the error of a nil reply (a missing key, a nil array).
var ErrNil = errors.New("launch: nil reply")

// ReplyError is an error reply of the server, such as "ERR unknown command"
// or "LOADING ...". Network and protocol failures are other error types, so
// that a caller can tell "the server said no" from "the server could not be
// reached".
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// maxBulk bounds the allocation a corrupt length prefix can cause.
const maxBulk = 512 << 20

// Reply is one decoded RESP2 value.
type Reply struct {
	// Kind is the type byte: '+', '-', ':', '$' or '*'.
	Kind byte
	// Str is a simple or bulk string, an integer in decimal or an error
	// message.
	Str string
	// Elems are the elements of an array.
	Elems []Reply
	// Null marks a nil bulk string or array.
	Null bool
}

// Err returns the reply as a [ReplyError] if it is an error reply, and nil
// otherwise.
func (r Reply) Err() error {
	if r.Kind == '-' {
		return ReplyError(r.Str)
	}
	return nil
}

// Text renders the reply as a string: simple and bulk strings as they are,
// integers in decimal, arrays as their elements joined by "\n" (nested
// arrays flattened, nil elements as empty lines, error elements as their
// message). A nil reply is [ErrNil] and an error reply a [ReplyError].
func (r Reply) Text() (string, error) {
	switch {
	case r.Null:
		return "", ErrNil
	case r.Kind == '-':
		return "", ReplyError(r.Str)
	case r.Kind == '*':
		return strings.Join(r.flatten(nil), "\n"), nil
	default:
		return r.Str, nil
	}
}

func (r Reply) flatten(out []string) []string {
	if r.Kind != '*' || r.Null {
		return append(out, r.Str)
	}
	for _, e := range r.Elems {
		out = e.flatten(out)
	}
	return out
}

// RoundTrip sends the commands pipelined on one new connection to the
// Redis server at addr and reads one reply per command. timeout bounds the
// whole exchange, dial included; a timeout is an error wrapping a
// net.Error whose Timeout method reports true. A new connection per call
// needs no reconnecting across kills and restarts.
func RoundTrip(addr string, timeout time.Duration, cmds ...[]string) ([]Reply, error) {
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("launch: dial %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("launch: %s: %w", addr, err)
	}
	var buf []byte
	for _, args := range cmds {
		buf = appendCommand(buf, args)
	}
	if _, err := conn.Write(buf); err != nil {
		return nil, fmt.Errorf("launch: write to %s: %w", addr, err)
	}
	br := bufio.NewReader(conn)
	out := make([]Reply, 0, len(cmds))
	for range cmds {
		r, err := readReply(br)
		if err != nil {
			return nil, fmt.Errorf("launch: read from %s: %w", addr, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Do is [RoundTrip] with the replies rendered by [Reply.Text]: the error is
// that of the first command whose reply is nil or an error, or of the
// exchange, in which case the replies are nil.
func Do(addr string, timeout time.Duration, cmds ...[]string) ([]string, error) {
	rs, err := RoundTrip(addr, timeout, cmds...)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rs))
	var first error
	for i, r := range rs {
		s, err := r.Text()
		if first == nil {
			first = err
		}
		out[i] = s
	}
	return out, first
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

func readReply(br *bufio.Reader) (Reply, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return Reply{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return Reply{}, fmt.Errorf("malformed RESP line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', '-':
		return Reply{Kind: kind, Str: body}, nil
	case ':':
		if _, err := strconv.ParseInt(body, 10, 64); err != nil {
			return Reply{}, fmt.Errorf("malformed RESP integer %q", body)
		}
		return Reply{Kind: kind, Str: body}, nil
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulk {
			return Reply{}, fmt.Errorf("malformed RESP bulk length %q", body)
		}
		if n == -1 {
			return Reply{Kind: kind, Null: true}, nil
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(br, data); err != nil {
			return Reply{}, err
		}
		if data[n] != '\r' || data[n+1] != '\n' {
			return Reply{}, errors.New("malformed RESP bulk string terminator")
		}
		return Reply{Kind: kind, Str: string(data[:n])}, nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 || n > maxBulk {
			return Reply{}, fmt.Errorf("malformed RESP array length %q", body)
		}
		if n == -1 {
			return Reply{Kind: kind, Null: true}, nil
		}
		r := Reply{Kind: kind, Elems: make([]Reply, 0, min(n, 1024))}
		for range n {
			e, err := readReply(br)
			if err != nil {
				return Reply{}, err
			}
			r.Elems = append(r.Elems, e)
		}
		return r, nil
	default:
		return Reply{}, fmt.Errorf("unsupported RESP type %q", kind)
	}
}

// InfoField returns the value of field in the text of an INFO reply, or "".
func InfoField(info, field string) string { return infoField(info, field) }

func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok && k == field {
			return v
		}
	}
	return ""
}
