// Package fence helps a protected resource check fencing tokens, so that a
// lock holder whose lease ended without its knowing cannot overwrite the
// work of the holder that came after it.
//
// A lease is not enough on its own. Between a holder's last check of its
// lease and the moment its write reaches the resource, the holder can pause
// (a GC cycle, swapping, a stopped VM) or its packets can sit in a
// congested network, for longer than the TTL. The lease expires, another
// process acquires the lock and writes, and then the delayed write lands
// on top of it. The first holder did nothing wrong by its own reckoning;
// no check it could make beforehand closes that gap.
//
// The resource can close it. Every holding of a distlock lock carries a
// token that is strictly greater than the tokens of all earlier holdings of
// the same key. The holder sends its token with each write; the resource
// remembers the highest token it has accepted and refuses any write that
// carries a lower one. The delayed write then fails with [ErrStale] instead
// of silently undoing its successor's work. The check and the write must be
// one atomic step at the resource: a check followed later by an unguarded
// write reopens the gap.
//
// The package has one helper per kind of resource:
//
//   - [Guard]: a resource owned by one process, such as a service that
//     takes writes from lock holders over the network. [Handler] puts a
//     Guard in front of an HTTP handler; clients send the token in the
//     [Header] header ([SetHeader]).
//   - package [github.com/distlock-go/distlock/fence/redisfence]: a value
//     in Redis stored together with its token and replaced by one Lua
//     script only if the new token is not lower. It lives apart so that a
//     program fencing other resources does not build a Redis client.
//   - [CheckResult]: a row in an SQL database, updated with a conditional
//     UPDATE (below).
//
// Equal tokens are accepted everywhere: they come from the same holding
// writing again — as long as the lock's store never issues a token twice.
// A store that lost its data can (a Redis server restarted without
// persistence and with its guards off, a failover to a lagging replica with
// its clock set back): then two holders present one token. To tell them
// apart, send the holding's identifier beside the token, the lock's Holder
// (a one-way hash of its owner token, safe to pass around), and use the
// helpers that take it: [Guard.DoHolder] and [Guard.AdmitHolder],
// redisfence.SetHolder, [HolderHeader] (read by [Handler]), and a holder
// column in SQL. A write with the token the resource accepted last, from a
// different holder, then fails with [ErrTokenReused] (which is also
// [ErrStale]): the first holder to write keeps the resource. A write that
// names no holder matches any.
//
// # SQL
//
// Keep the token in a column next to the data and make it part of the
// UPDATE's condition, so the database checks and writes in one statement:
//
//	res, err := db.ExecContext(ctx,
//		`UPDATE orders SET status = $1, fence_token = $2
//		 WHERE id = $3 AND fence_token <= $2`,
//		status, int64(l.Token()), id)
//	if err := fence.CheckResult(res, err); err != nil {
//		return err // errors.Is(err, fence.ErrStale) if a later holder wrote first
//	}
//
// The column is a BIGINT NOT NULL, starting at 0. Pass the token as an int64:
// database/sql refuses uint64 values with the high bit set, which no real
// token reaches. [CheckResult] reports an UPDATE that changed no row as
// [ErrStale], so the row must exist beforehand (insert it with token 0);
// otherwise a missing row also reads as stale. On MySQL and MariaDB,
// RowsAffected counts changed rows, not matched ones, and an identical
// repeated write would read as stale: connect with the client flag
// CLIENT_FOUND_ROWS (clientFoundRows=true for go-sql-driver/mysql).
//
// To refuse a second holder with the same token, keep the holder beside the
// token (fence_holder TEXT NOT NULL, starting empty) and let an equal token
// through only for the holder that wrote it:
//
//	UPDATE orders SET status = $1, fence_token = $2, fence_holder = $4
//	 WHERE id = $3 AND (fence_token < $2 OR (fence_token = $2 AND fence_holder = $4))
//
// with $4 = l.Holder(). Every writer must then name its holder.
package fence
