package fence

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Header is the HTTP header that carries a fencing token, in decimal.
const Header = "Distlock-Token"

// HolderHeader is the optional HTTP header that names the holding that
// sends the token (the lock's Holder): [Handler] then refuses a second
// holder with the same token.
const HolderHeader = "Distlock-Holder"

// maxHolder bounds the length of a holder id taken from a request.
const maxHolder = 128

// SetHeader sets the [Header] header of h to token, replacing any value.
func SetHeader(h http.Header, token uint64) {
	h.Set(Header, strconv.FormatUint(token, 10))
}

// SetHolderHeader sets the [HolderHeader] header of h to holder, replacing
// any value; an empty holder removes it.
func SetHolderHeader(h http.Header, holder string) {
	if holder == "" {
		h.Del(HolderHeader)
		return
	}
	h.Set(HolderHeader, holder)
}

// HolderFromRequest returns the holder id in the [HolderHeader] header of
// r, or "" if there is none. It returns an error if the header appears more
// than once, or is longer than 128 bytes or holds anything but printable
// ASCII.
func HolderFromRequest(r *http.Request) (string, error) {
	vs := r.Header.Values(HolderHeader)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", fmt.Errorf("fence: request has %d %s headers, want at most one", len(vs), HolderHeader)
	}
	v := vs[0]
	if len(v) > maxHolder {
		return "", fmt.Errorf("fence: %s header is %d bytes long, longer than %d", HolderHeader, len(v), maxHolder)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return "", fmt.Errorf("fence: malformed %s header %q: want printable ASCII without spaces", HolderHeader, v)
		}
	}
	return v, nil
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
// passing it to next. The token comes from the [Header] header, the holder,
// if any, from the [HolderHeader] header, and the resource name from
// resource(r); a nil resource uses r.URL.Path.
//
// A request without a valid token, or with a malformed holder, gets 400 Bad
// Request; one whose token is lower than the highest g accepted for its
// resource, or equal to it but from another holder ([Guard.DoHolder]), gets
// 409 Conflict; neither reaches next. Otherwise next serves the request inside
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
		holder, err := HolderFromRequest(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		name := r.URL.Path
		if resource != nil {
			name = resource(r)
		}
		err = g.DoHolder(name, token, holder, func() error {
			next.ServeHTTP(w, r)
			return nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
		}
	})
}
