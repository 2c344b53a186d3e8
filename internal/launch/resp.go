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

// ErrNil is returned by [Do] for a nil reply.
var ErrNil = errors.New("launch: nil reply")

// ReplyError is an error reply of the server, such as "LOADING ...", as
// opposed to a failure to reach it.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// maxBulk bounds a bulk reply, so that garbage on the wire cannot make Do
// allocate without limit.
const maxBulk = 64 << 20

// Do sends each command to the Redis server at addr, pipelined on one new
// connection, and returns the replies as strings: simple and bulk strings as
// they are, integers in decimal, arrays as their elements joined by "\n". A
// nil reply is [ErrNil], an error reply a [ReplyError]; the first failing
// command decides the error. timeout bounds the whole exchange.
func Do(addr string, timeout time.Duration, cmds ...[]string) ([]string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	out := make([]string, len(cmds))
	var first error
	for i := range cmds {
		s, err := readReply(r)
		if broken(err) {
			return nil, err // nothing more can be read
		}
		if first == nil {
			first = err
		}
		out[i] = s
	}
	return out, first
}

// readReply reads one RESP2 value.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("launch: malformed reply %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+', ':':
		return body, nil
	case '-':
		return "", ReplyError(body)
	case '$':
		n, err := strconv.Atoi(body)
		switch {
		case err != nil || n > maxBulk:
			return "", fmt.Errorf("launch: malformed bulk length %q", body)
		case n < 0:
			return "", ErrNil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		switch {
		case err != nil || n > maxBulk:
			return "", fmt.Errorf("launch: malformed array length %q", body)
		case n < 0:
			return "", ErrNil
		}
		elems := make([]string, 0, n)
		var first error
		for range n {
			s, err := readReply(r)
			if broken(err) {
				return "", err
			}
			if first == nil && !errors.Is(err, ErrNil) {
				first = err
			}
			elems = append(elems, s)
		}
		return strings.Join(elems, "\n"), first
	}
	return "", fmt.Errorf("launch: unknown reply type %q", kind)
}

// broken reports whether err means the reply stream cannot be read on:
// anything but a nil or error reply.
func broken(err error) bool {
	var re ReplyError
	return err != nil && !errors.As(err, &re) && !errors.Is(err, ErrNil)
}

// infoField returns the value of field in the text of an INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}
