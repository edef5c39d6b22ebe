package main

import (
	"fmt"
	"strconv"
	"strings"
)

// clientsFlag is --clients: the kind of clients (grpc or envoy) or their
// count (a number, the client nodes), repeatable: `--clients envoy
// --clients 20`. A count stays the client nodes' count whatever the kind.
type clientsFlag struct{ o *options }

func (f clientsFlag) String() string {
	if f.o == nil {
		return ""
	}
	return fmt.Sprintf("%s (%d)", f.o.kind, f.o.clients)
}

func (f clientsFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	switch s {
	case grpcClients, envoyClients:
		f.o.kind = s
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want grpc, envoy or a count of client nodes, got %q", s)
	}
	f.o.clients, f.o.clientsSet = n, true
	return nil
}

// envoyCounts gives --clients envoy its own default count of client nodes
// (one Envoy each) unless --clients gave one.
func (o *options) envoyCounts(quick bool) {
	if o.kind != envoyClients || o.clientsSet {
		return
	}
	o.clients = envoyDefaultClients
	if quick {
		o.clients = envoyQuickClients
	}
}
