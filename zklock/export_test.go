package zklock

// EscapeKey is escapeKey, for tests that look at a key's nodes.
var EscapeKey = escapeKey

// OwnerHash is ownerHash, for tests that look for an owner's node.
var OwnerHash = ownerHash
