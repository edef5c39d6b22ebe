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

func TestLoopbackOutsideEphemeralRange(t *testing.T) {
	lo, hi := ephemeralRange()
	if windows(lo, hi) == nil {
		t.Skipf("ephemeral range %d-%d leaves no room", lo, hi)
	}
	ports, err := Loopback(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p >= lo && p <= hi {
			t.Errorf("port %d is in the ephemeral range %d-%d", p, lo, hi)
		}
		if p < minPort {
			t.Errorf("port %d is below %d", p, minPort)
		}
	}
}

func TestWindows(t *testing.T) {
	for _, c := range []struct {
		lo, hi int
		want   []window
	}{
		{32768, 60999, []window{{10000, 32767}, {61000, 65535}}},
		{1024, 65535, nil},  // no room: the kernel's choice
		{10000, 64000, nil}, // 1,535 ports above: too few
		{9000, 60000, []window{{60001, 65535}}},
		{20000, 65535, []window{{10000, 19999}}},
	} {
		got := windows(c.lo, c.hi)
		if len(got) != len(c.want) {
			t.Errorf("windows(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("windows(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
			}
		}
	}
	ws := []window{{100, 101}, {200, 200}}
	seen := map[int]int{}
	for range 3000 {
		seen[draw(ws)]++
	}
	for _, p := range []int{100, 101, 200} {
		if seen[p] < 800 {
			t.Errorf("draw: port %d drawn %d times of 3000, want about 1000", p, seen[p])
		}
	}
	if len(seen) != 3 {
		t.Errorf("draw: ports %v, want only 100, 101 and 200", seen)
	}
}
