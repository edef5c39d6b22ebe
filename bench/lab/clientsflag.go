package main

import (
	"fmt"
	"strconv"
	"strings"
)

// clientsFlag is --clients: the kind of clients (grpc or envoy) or their
// count (a number, the client nodes), repeatable: `--clients envoy
// --clients 24`. Either kind has the same count by default, so that the
// Envoys are the grpc-go lab's fleet (capacities, rates and subsets).
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
	f.o.clients = n
	return nil
}
