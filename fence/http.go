package fence

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Header is the HTTP header that carries a fencing token, in decimal.
const Header = "Distlock-Token"

// SetHeader sets the [Header] header of h to token, replacing any value.
func SetHeader(h http.Header, token uint64) {
	h.Set(Header, strconv.FormatUint(token, 10))
}

// TokenFromRequest returns the fencing token in the [Header] header of r.
// It returns an error if the header is missing or empty, appears more than
// once, or is not a decimal number between 0 and 2^64-1.
func TokenFromRequest(r *http.Request) (uint64, error) {
	vs := r.Header.Values(Header)
	switch {
	case len(vs) == 0 || (len(vs) == 1 && vs[0] == ""):
		return 0, errors.New("fence: request has no " + Header + " header")
	case len(vs) > 1:
		return 0, fmt.Errorf("fence: request has %d %s headers, want one", len(vs), Header)
	}
	t, err := strconv.ParseUint(vs[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence: malformed %s header %q: want a decimal number up to %d", Header, vs[0], uint64(1<<64-1))
	}
	return t, nil
}

// Handler returns a handler that admits each request through g before
// passing it to next. The token comes from the [Header] header, the
// resource name from resource(r); a nil resource uses r.URL.Path.
//
// A request without a valid token gets 400 Bad Request, and one whose token
// is lower than the highest g accepted for its resource gets 409 Conflict;
// neither reaches next. Otherwise next serves the request inside
// [Guard.Do]: requests for the same resource are served one at a time, so
// a request admitted with an older token cannot write after a newer one.
// next must not admit through g for the same resource itself.
func Handler(g *Guard, resource func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := TokenFromRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		name := r.URL.Path
		if resource != nil {
			name = resource(r)
		}
		err = g.Do(name, token, func() error {
			next.ServeHTTP(w, r)
			return nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
}
