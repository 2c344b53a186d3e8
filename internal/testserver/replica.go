package testserver

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// StartReplica starts a redis-server that replicates master, with opts as
// for StartRedis, and returns once it is in sync. It is not marked fresh:
// it copies master's data, the mark included.
func StartReplica(tb testing.TB, master *Redis, opts ...Option) *Redis {
	tb.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	cfg.extra = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())}, cfg.extra...)
	r := startRedis(tb, cfg)
	waitFor(tb, setupTimeout, "the replica to sync with the master", func() error { return replicating(r, master) })
	return r
}

// replicating reports why replica is not yet in sync with master.
func replicating(replica, master *Redis) error {
	info, err := Do(replica.Addr(), pollTimeout, "INFO", "replication")
	if err != nil {
		return err
	}
	if got := infoField(info, "master_host") + ":" + infoField(info, "master_port"); got != master.Addr() {
		return fmt.Errorf("replica follows %q, want %s", got, master.Addr())
	}
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("replica master_link_status=%q", st)
	}
	info, err = Do(master.Addr(), pollTimeout, "INFO", "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(infoField(info, "slave0"), "state=online") {
		return fmt.Errorf("master slave0=%q", infoField(info, "slave0"))
	}
	return nil
}
