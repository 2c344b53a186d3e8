package sqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/distlock-go/distlock/driver"
	"github.com/distlock-go/distlock/sqllock"
)

// stored lists the rows of the default tables for keys beginning with
// prefix: "name" for the lease table, "name/owner" for the holds table.
func (d database) stored(t testing.TB, db *sql.DB, prefix string) []string {
	t.Helper()
	ctx := ctxFor(t, 10*time.Second)
	var out []string
	for _, q := range []string{
		"SELECT name, '' FROM " + sqllock.DefaultTable,
		"SELECT name, owner FROM " + sqllock.DefaultTable + "_holds",
		"SELECT name, owner FROM " + sqllock.DefaultTable + "_queue",
	} {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var name, owner []byte
			if err := rows.Scan(&name, &owner); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if !strings.HasPrefix(string(name), prefix) {
				continue
			}
			if len(owner) > 0 {
				name = append(append(name, '/'), owner...)
			}
			out = append(out, string(name))
		}
		if err := rows.Close(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return out
}

// kindOf is one way of using a key.
type kindOf struct {
	kind  driver.Kind
	limit int
}

func (k kindOf) String() string {
	if k.kind == driver.Permit {
		return fmt.Sprintf("permit of %d", k.limit)
	}
	return k.kind.String()
}

// TestKindsExclude: while a key is held as one family (mutex, read-write
// lock, semaphore of n), a request of another family, or a permit of
// another size, is refused with a *driver.KindError naming the holding,
// and nothing is taken: once the holding ends, the same request is
// granted.
func TestKindsExclude(t *testing.T) {
	kinds := []kindOf{{driver.Exclusive, 0}, {driver.Write, 0}, {driver.Read, 0}, {driver.Permit, 2}, {driver.Permit, 3}}
	eachDatabase(t, func(t *testing.T, d database) {
		b := d.backend(t)
		ctx := ctxFor(t, time.Minute)
		for _, held := range kinds {
			for _, asked := range kinds {
				if driver.Compatible(held.kind, held.limit, asked.kind, asked.limit) {
					continue
				}
				key := "kinds-" + strings.ReplaceAll(held.String()+"-"+asked.String(), " ", "")
				hl := driver.Lease{Key: key, Owner: "holder", Kind: held.kind}
				if g, err := b.Acquire(ctx, driver.Request{Lease: hl, TTL: time.Minute, Limit: held.limit}); err != nil || !g.Acquired {
					t.Fatalf("%s: Acquire: %+v, %v", held, g, err)
				}
				if held.kind == driver.Permit {
					if info, err := b.Inspect(ctx, key); err != nil || info.Limit != held.limit {
						t.Errorf("Inspect of a %s: Limit %d, %v; want %d", held, info.Limit, err, held.limit)
					}
				}
				al := driver.Lease{Key: key, Owner: "asker", Kind: asked.kind}
				req := driver.Request{Lease: al, TTL: time.Minute, Limit: asked.limit}
				g, err := b.Acquire(ctx, req)
				var kerr *driver.KindError
				switch {
				case g.Acquired:
					t.Errorf("a %s on a key held as a %s: granted (token %d); want a KindError", asked, held, g.Token)
					b.Release(ctx, al)
				case !errors.As(err, &kerr) || !errors.Is(err, driver.ErrKindMismatch):
					t.Errorf("a %s on a key held as a %s: %v; want a *driver.KindError", asked, held, err)
				case kerr.Held != held.kind.Family() || kerr.Asked != asked.kind || (held.kind == driver.Permit && kerr.HeldLimit != held.limit):
					t.Errorf("a %s on a key held as a %s: %+v", asked, held, *kerr)
				}
				if err := b.Release(ctx, hl); err != nil {
					t.Fatalf("%s: Release: %v", held, err)
				}
				g, err = b.Acquire(ctx, req)
				if err != nil || !g.Acquired {
					t.Errorf("a %s once the %s was released: %+v, %v; want granted", asked, held, g, err)
					continue
				}
				if err := b.Release(ctx, al); err != nil {
					t.Errorf("%s: Release: %v", asked, err)
				}
			}
		}
	})
}

// TestStateReclaimed: keys locked and released as every kind leave no row
// behind once they have been free for a while, and a key locked again
// after its row went gets a token above every earlier one.
func TestStateReclaimed(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		b := d.backend(t)
		admin := d.open(t)
		ctx := ctxFor(t, 2*time.Minute)
		const prefix = "reclaim-"
		var last uint64
		for i, k := range []kindOf{{driver.Exclusive, 0}, {driver.Write, 0}, {driver.Read, 0}, {driver.Permit, 3}} {
			l := driver.Lease{Key: fmt.Sprintf("%s%d", prefix, i), Owner: "o", Kind: k.kind}
			g, err := b.Acquire(ctx, driver.Request{Lease: l, TTL: time.Minute, Limit: k.limit})
			if err != nil || !g.Acquired {
				t.Fatalf("%s: Acquire: %+v, %v", k, g, err)
			}
			if err := b.Release(ctx, l); err != nil {
				t.Fatalf("%s: Release: %v", k, err)
			}
			last = max(last, g.Token)
		}
		again := driver.Lease{Key: prefix + "0", Owner: "again"}
		g, err := b.Acquire(ctx, driver.Request{Lease: again, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire: %+v, %v", g, err)
		}
		last = max(last, g.Token)
		if err := b.Release(ctx, again); err != nil {
			t.Fatalf("Release: %v", err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			rows := d.stored(t, admin, prefix)
			if len(rows) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rows of free keys still stored 90s after their release: %q", rows)
			}
			time.Sleep(200 * time.Millisecond)
		}
		g, err = b.Acquire(ctx, driver.Request{Lease: again, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire after the rows went: %+v, %v", g, err)
		}
		if g.Token <= last {
			t.Errorf("token %d after the key's row was reclaimed; want above %d", g.Token, last)
		}
		b.Release(context.Background(), again)
	})
}

// TestMigrateOldTable: a lease table made by a version without the kind
// columns, the count of fair waiters, the waiters' marks and the token
// counter is brought up to date on first use: its
// keys go on above their tokens, new keys start above every token of the
// table on PostgreSQL, and kinds are enforced.
func TestMigrateOldTable(t *testing.T) {
	eachDatabase(t, func(t *testing.T, d database) {
		dialect := map[string]sqllock.Dialect{"pgx": sqllock.Postgres, "mysql": sqllock.MySQL, "sqlite": sqllock.SQLite}[d.driver]
		ddl, err := sqllock.Schema(dialect, sqllock.DefaultTable)
		if err != nil {
			t.Fatal(err)
		}
		old := strings.Split(ddl, ";\n")[0]
		// The columns from kind on are the later versions' (PostgreSQL's
		// waiting_us the latest).
		if i, j := strings.Index(old, ",\n\tkind "), strings.LastIndex(old, "\n)"); i > 0 && j > i {
			old = old[:i] + old[j:]
		}
		if strings.Contains(old, "kind") || strings.Contains(old, "queued") || strings.Contains(old, "waiting_us") {
			t.Fatalf("could not make the old DDL from %q", old)
		}
		admin := d.open(t)
		ctx := ctxFor(t, time.Minute)
		for _, q := range []string{old, "INSERT INTO " + sqllock.DefaultTable + " (name, owners, token, meta) VALUES ('old-key', '', 41, '')"} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		b := d.backend(t)
		mutex := driver.Lease{Key: "old-key", Owner: "o"}
		g, err := b.Acquire(ctx, driver.Request{Lease: mutex, TTL: time.Minute})
		if err != nil || !g.Acquired || g.Token <= 41 {
			t.Fatalf("Acquire of a key of the old table: %+v, %v; want granted above token 41", g, err)
		}
		_, err = b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "old-key", Owner: "p", Kind: driver.Permit}, TTL: time.Minute, Limit: 2})
		if !errors.Is(err, driver.ErrKindMismatch) {
			t.Errorf("a permit on a mutex's key of the migrated table: %v; want ErrKindMismatch", err)
		}
		g, err = b.Acquire(ctx, driver.Request{Lease: driver.Lease{Key: "new-key", Owner: "o"}, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("Acquire of a new key: %+v, %v", g, err)
		}
		if dialect == sqllock.Postgres && g.Token <= 41 {
			t.Errorf("token %d of a new key on PostgreSQL; want above the table's 41", g.Token)
		}
		fair := driver.Request{Lease: driver.Lease{Key: "fair-key", Owner: "f"}, TTL: time.Minute, Fair: true, Queue: time.Minute}
		if g, err := b.Acquire(ctx, fair); err != nil || !g.Acquired {
			t.Fatalf("fair Acquire on the migrated table: %+v, %v", g, err)
		}
		if err := b.Release(ctx, fair.Lease); err != nil {
			t.Fatalf("Release of a fair lock on the migrated table: %v", err)
		}
	})
}
