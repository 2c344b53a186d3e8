package distlock

import (
	"crypto/sha256"
	"encoding/hex"
)

// Holder returns an identifier of this holding, for resources that check
// fencing tokens and want to tell two holders apart when they present the
// same token (package fence: [fence.Guard.DoHolder], the Holder header,
// the holder column of a fenced UPDATE). Equal tokens from different
// holders mean the store repeated a token, after losing its data.
//
// It is a one-way hash of the holding's owner token, which is a bearer
// secret (it can renew and release the lock): the Holder can be logged and
// sent to other systems without giving that power away. It is 32
// hexadecimal digits, fixed for the holding. Nested holds of a re-entrant
// lock share their token but each has its own Holder: write with the
// outermost hold's.
//
// [fence.Guard.DoHolder]: https://pkg.go.dev/github.com/distlock-go/distlock/fence#Guard.DoHolder
func (l *Lock) Holder() string {
	sum := sha256.Sum256([]byte("distlock holder\x00" + l.lease.Owner))
	return hex.EncodeToString(sum[:16])
}
