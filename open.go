package distlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/distlock-go/distlock/driver"
)

// An Opener makes a backend from a URL whose scheme it was registered for.
// It returns an error wrapping [ErrInvalidURL] when the URL lacks what it
// needs. [Client.Close] closes the backend it returns.
type Opener func(ctx context.Context, u *url.URL) (driver.Backend, error)

var registry struct {
	sync.RWMutex
	openers map[string]Opener
}

// Register makes a backend available to [Open] under scheme (lower case,
// without "://"). Backend packages call it from init, so importing a
// backend — even as `import _ "..."` — registers it. Registering a scheme
// twice replaces the earlier opener.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if registry.openers == nil {
		registry.openers = make(map[string]Opener)
	}
	registry.openers[strings.ToLower(scheme)] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	var s []string
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open returns a Client for the backend that rawURL names, such as
// "redis://localhost:6379/0" or "mem://". The backend's package must be
// imported so that its scheme is registered. Close the client when done.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Client, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the URL, password included: say only why.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (want e.g. redis://host:port)", ErrInvalidURL, u.Redacted())
	}
	registry.RLock()
	open := registry.openers[strings.ToLower(u.Scheme)]
	registry.RUnlock()
	if open == nil {
		return nil, unknownScheme(u.Scheme)
	}
	b, err := open(ctx, u)
	if err != nil {
		return nil, err
	}
	c := New(b, opts...)
	c.owned = true
	return c, nil
}

// schemePackages names the package that registers each scheme of this
// repository, for the error of a URL whose backend was not imported.
var schemePackages = map[string]string{
	"redis":          "redislock",
	"rediss":         "redislock",
	"redis+sentinel": "redislock",
	"redis+cluster":  "redislock",
	"redlock":        "redlock",
	"zk":             "zklock",
	"postgres":       "sqllock/sqlurl",
	"postgresql":     "sqllock/sqlurl",
	"mysql":          "sqllock/sqlurl",
	"sqlite":         "sqllock/sqlurl",
	"etcd":           "etcdlock",
	"mem":            "memlock",
}

// unknownScheme is Open's error for a scheme nobody registered.
func unknownScheme(scheme string) error {
	registered := strings.Join(Schemes(), ", ")
	if registered == "" {
		registered = "none"
	}
	if pkg, ok := schemePackages[strings.ToLower(scheme)]; ok {
		return fmt.Errorf("%w: %q: import the backend's package so that it registers the scheme, e.g. import _ \"github.com/distlock-go/distlock/%s\" (registered: %s)",
			ErrUnknownScheme, scheme, pkg, registered)
	}
	return fmt.Errorf("%w: %q (registered: %s)", ErrUnknownScheme, scheme, registered)
}
