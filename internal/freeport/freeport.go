package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Loopback returns n distinct ports of 127.0.0.1 free for both TCP and
// UDP (Consul's serf uses both) at the time of the call.
//
// The ports are drawn at random from outside the kernel's ephemeral range
// (ip_local_port_range): a child that is stopped and started again on its
// ports (the harness's Stop and Start) must find them free, and any
// outgoing connection made while it was down takes its local port from the
// ephemeral range. Where that range leaves too little room, the kernel's
// own choice is used.
func Loopback(n int) ([]int, error) {
	return pick(n, windows(ephemeralRange()))
}

// window is a range of ports [lo, hi].
type window struct{ lo, hi int }

// minPort is the lowest port handed out: below are the well-known ports
// and the registered ports that local services most often hold.
const minPort = 10000

// minRoom is the fewest ports outside the ephemeral range worth drawing
// from; with fewer, Loopback falls back to the kernel's choice.
const minRoom = 2000

// ephemeralRange reads the kernel's ephemeral port range; Linux's default
// when it cannot.
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}

// windows are the port ranges outside [eLo, eHi] and at or above minPort,
// or none when they hold fewer than minRoom ports.
func windows(eLo, eHi int) []window {
	var ws []window
	if eLo-1 >= minPort {
		ws = append(ws, window{minPort, eLo - 1})
	}
	if eHi+1 <= 65535 {
		ws = append(ws, window{max(eHi+1, minPort), 65535})
	}
	room := 0
	for _, w := range ws {
		room += w.hi - w.lo + 1
	}
	if room < minRoom {
		return nil
	}
	return ws
}

// draw returns a random port of ws, each port equally likely.
func draw(ws []window) int {
	room := 0
	for _, w := range ws {
		room += w.hi - w.lo + 1
	}
	i := rand.IntN(room)
	for _, w := range ws {
		if size := w.hi - w.lo + 1; i >= size {
			i -= size
			continue
		}
		return w.lo + i
	}
	panic("unreachable")
}

// pick holds n ports free for TCP and UDP, drawn from ws (the kernel's
// choice when ws is empty), and releases them on return.
func pick(n int, ws []window) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100+20*n {
			return nil, errors.New("freeport: no free loopback ports")
		}
		addr := "127.0.0.1:0"
		if len(ws) > 0 {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(draw(ws)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if len(ws) > 0 {
				continue // taken: draw another
			}
			return nil, fmt.Errorf("freeport: %w", err)
		}
		u, err := net.ListenPacket("udp", l.Addr().String())
		if err != nil {
			l.Close()
			continue
		}
		u.Close()
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
