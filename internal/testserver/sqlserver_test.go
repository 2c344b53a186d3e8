package testserver

import (
	"net"
	"testing"
	"time"
)

// dialable reports whether addr accepts a TCP connection within d.
func dialable(addr string, d time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func TestPostgresKillRestart(t *testing.T) {
	p := StartPostgres(t)
	if !dialable(p.Addr(), time.Second) {
		t.Fatalf("postgres at %s not dialable after start", p.Addr())
	}
	p.Kill()
	if dialable(p.Addr(), time.Second) {
		t.Fatalf("postgres at %s still dialable after Kill", p.Addr())
	}
	p.Restart()
	if !dialable(p.Addr(), time.Second) {
		t.Fatalf("postgres at %s not dialable after Restart", p.Addr())
	}
}

func TestMariaDBKillRestart(t *testing.T) {
	m := StartMariaDB(t)
	if !dialable(m.Addr(), time.Second) {
		t.Fatalf("mariadb at %s not dialable after start", m.Addr())
	}
	m.Kill()
	if dialable(m.Addr(), time.Second) {
		t.Fatalf("mariadb at %s still dialable after Kill", m.Addr())
	}
	m.Restart()
	if !dialable(m.Addr(), time.Second) {
		t.Fatalf("mariadb at %s not dialable after Restart", m.Addr())
	}
}
