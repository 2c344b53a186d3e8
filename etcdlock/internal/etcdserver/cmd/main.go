// Command etcdserver runs one etcd member on the embedded server, for the
// tests of package etcdlock. It is a Go module of its own (package etcdtest
// builds it with go build in this directory), so that etcd's server is
// never part of the library's dependencies.
//
// It prints "ready" on standard output once the member serves clients,
// and stops on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	cfg := embed.NewConfig()
	var client, peer string
	flag.StringVar(&cfg.Name, "name", "m0", "member name")
	flag.StringVar(&cfg.Dir, "data-dir", "", "data directory")
	flag.StringVar(&client, "client-url", "", "client URL (listen and advertise)")
	flag.StringVar(&peer, "peer-url", "", "peer URL (listen and advertise)")
	flag.StringVar(&cfg.InitialCluster, "initial-cluster", "", "name=peer-url,... of every member")
	flag.StringVar(&cfg.ClusterState, "initial-cluster-state", "new", "new or existing")
	flag.UintVar(&cfg.TickMs, "heartbeat-interval", 50, "heartbeat interval in ms")
	flag.UintVar(&cfg.ElectionMs, "election-timeout", 500, "election timeout in ms")
	flag.Parse()
	cu, err := url.Parse(client)
	if err != nil {
		log.Fatalf("etcdserver: -client-url: %v", err)
	}
	pu, err := url.Parse(peer)
	if err != nil {
		log.Fatalf("etcdserver: -peer-url: %v", err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialClusterToken = "distlock-test"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcdserver: %v", err)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		log.Fatalf("etcdserver: %v", err)
	case <-stop:
		e.Close()
		return
	case <-time.After(2 * time.Minute):
		log.Fatalf("etcdserver: not ready after 2m")
	}
	select {
	case err := <-e.Err():
		log.Fatalf("etcdserver: %v", err)
	case <-stop:
		e.Close()
	}
}
