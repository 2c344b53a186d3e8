package etcdlock

// SetBeforeIssue makes f run in every attempt that finds the owner's key
// granted, after that check and before the grant is issued, with the
// owner's etcd key, until restore is called. It is one hook for the whole
// test binary: f must ignore the keys of other tests, and one test at a
// time may set it.
func SetBeforeIssue(f func(key string)) (restore func()) {
	beforeIssue.Store(&f)
	return func() { beforeIssue.Store(nil) }
}
