package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopback(t *testing.T) {
	ports, err := Loopback(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 {
		t.Fatalf("got %d ports, want 3", len(ports))
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d twice", p)
		}
		seen[p] = true
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("TCP %s not free: %v", addr, err)
			continue
		}
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Errorf("UDP %s not free: %v", addr, err)
			continue
		}
		u.Close()
	}
}
