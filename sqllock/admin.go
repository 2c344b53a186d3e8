package sqllock

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/internal/keylist"
)

// Inspect implements driver.Backend.
func (b *Backend) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := driver.ValidateKey(key); err != nil {
		return driver.Info{}, fmt.Errorf("sqllock: %w", err)
	}
	if err := b.start(ctx); err != nil {
		return driver.Info{}, err
	}
	var (
		held               bool
		token, left, since int64
		holds, lim         int
		meta               string
	)
	err := b.db.QueryRowContext(ctx, b.inspect.query, b.inspect.args(key)...).Scan(&held, &token, &holds, &left, &since, &meta, &lim)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Info{}, nil
	}
	if err != nil {
		return driver.Info{}, fmt.Errorf("sqllock: inspect: %w", err)
	}
	if b.conns != nil && held {
		// The row says held; the native lock says whether its connection
		// lives.
		if held, err = b.nativeHeld(ctx, key); err != nil {
			return driver.Info{}, fmt.Errorf("sqllock: inspect: %w", err)
		}
	}
	info := driver.Info{Token: uint64(token)}
	if !held && b.conns == nil {
		// A read-write lock or a semaphore keeps its holds apart.
		if meta, err = b.inspectShared(ctx, key, &info); err != nil {
			return driver.Info{}, err
		}
		if info.Kind == driver.Permit {
			info.Limit = lim
		}
		since = -1
	} else if held {
		info.Held, info.Kind, info.Holds = true, driver.Exclusive, max(holds, 1)
		info.TTL = time.Duration(left) * time.Microsecond
	}
	if !info.Held {
		return info, nil
	}
	info.Meta = make(map[string]string)
	if meta != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(meta), &m); err != nil {
			info.Warnings = append(info.Warnings, "the holder's metadata is not a JSON object of strings")
		}
		maps.Copy(info.Meta, m)
	}
	if since >= 0 {
		info.Meta["since"] = strconv.FormatInt(since/1000, 10)
	}
	return info, nil
}

// List implements driver.Backend with one query for the held names, then
// an Inspect of each.
func (b *Backend) List(ctx context.Context, prefix string) ([]driver.KeyInfo, error) {
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	// LIKE narrows the scan (SQLite's ignores ASCII case); the prefix
	// test below decides.
	pattern := strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(prefix) + "%"
	// Exclusive leases in the lease table, readers and permits in the
	// holds table.
	q := prepare(b.d, b.table, `SELECT name FROM {table} WHERE owners <> '' AND expires_us > {now} AND name LIKE $1 ESCAPE '!'
UNION SELECT name FROM {holds} WHERE released_us = 0 AND expires_us > {now} AND name LIKE $1 ESCAPE '!' ORDER BY name`)
	rows, err := b.db.QueryContext(ctx, q.query, q.args(pattern)...)
	if err != nil {
		return nil, fmt.Errorf("sqllock: list: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name []byte
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("sqllock: list: %w", err)
		}
		if strings.HasPrefix(string(name), prefix) {
			names = append(names, string(name))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqllock: list: %w", err)
	}
	return keylist.Held(ctx, names, b.Inspect)
}

// Break implements driver.Backend: Inspect, then one statement that marks
// the row free (keeping its token) and, on PostgreSQL, notifies waiters;
// for a read-write lock or a semaphore, one before it that ends its holds
// and notifies likewise. A connection-scoped lock is broken by ending the
// holder's connection on the server (pg_terminate_backend, KILL), which
// needs the right to: the same database user, or an administrator's.
func (b *Backend) Break(ctx context.Context, key string) (driver.Info, error) {
	info, err := b.Inspect(ctx, key)
	if err != nil || !info.Held {
		return info, err
	}
	if b.conns != nil {
		if err := b.endHolder(ctx, key); err != nil {
			return driver.Info{}, fmt.Errorf("sqllock: break: %w", err)
		}
	}
	if info.Kind != driver.Exclusive {
		// The key's row in the lease table is free already: the notice
		// goes with the holds.
		h := `UPDATE {holds} SET expires_us = 0 WHERE name = $1 AND released_us = 0 AND kind <> ` + strconv.Itoa(claim)
		if _, err := b.exec(ctx, noticed(b.d, b.table, h, "true"), key); err != nil {
			return driver.Info{}, fmt.Errorf("sqllock: break: %w", err)
		}
	}
	q := `UPDATE {table} SET owners = '', holds = 0, expires_us = 0, reentry = '' WHERE name = $1 AND owners <> ''`
	if _, err := b.exec(ctx, noticed(b.d, b.table, q, "true"), key); err != nil {
		return driver.Info{}, fmt.Errorf("sqllock: break: %w", err)
	}
	b.wakeLocal(key, wakeAll, "")
	return info, nil
}
