package zklock

// EscapeKey is escapeKey, for tests that look at a key's nodes.
var EscapeKey = escapeKey

// OwnerHash is ownerHash, for tests that look for an owner's node.
var OwnerHash = ownerHash

// SetLineRead sets the hook that runs in a watch's arm between reading the
// line and setting the watch; nil removes it.
func SetLineRead(f func()) {
	if f == nil {
		lineRead.Store(nil)
		return
	}
	lineRead.Store(&f)
}

// LinePath is where the holders and waiters of key live under root.
func LinePath(root, key string) string { return (&Backend{root: root}).linePath(key) }
