package testserver

import (
	"time"

	"github.com/distlock-go/distlock/internal/launch"
)

// ErrNil is returned by Do for a nil reply (a missing key, a nil array).
var ErrNil = launch.ErrNil

// ReplyError is an error reply sent by the server, such as
// "ERR unknown command" or "MOVED 3999 127.0.0.1:7001". Network and
// protocol failures are reported as other error types, so a test can tell
// "the server said no" from "the server could not be reached".
type ReplyError = launch.ReplyError

// Do sends one command to the server at addr on a new connection and
// returns the reply rendered by launch's Reply.Text: simple and bulk
// strings as they are, integers in decimal, arrays as their elements joined
// by "\n" (nested arrays flattened, nil elements as empty lines, error
// elements as their message). A nil reply returns ErrNil and an error reply
// a [ReplyError]. The timeout bounds the whole exchange, dial included; a
// timeout is reported as an error wrapping a net.Error whose Timeout method
// is true.
func Do(addr string, timeout time.Duration, args ...string) (string, error) {
	rs, err := launch.RoundTrip(addr, timeout, args)
	if err != nil {
		return "", err
	}
	return rs[0].Text()
}

// infoField returns the value of key in an INFO reply, or "".
func infoField(info, key string) string { return launch.InfoField(info, key) }
