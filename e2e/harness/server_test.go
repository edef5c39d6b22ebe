package harness

import (
	"bytes"
	"log/slog"
	"net"
	"slices"
	"testing"
)

// TestStartedAddrs reads the listeners' addresses from start-up lines as
// slog writes them, in text and in JSON, and finds none in other lines.
func TestStartedAddrs(t *testing.T) {
	want := listenAddrs{xds: "127.0.0.1:41001", admin: "[::1]:41002", rateLimit: "127.0.0.1:41003"}
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			log := slog.New(h(&b))
			log.Info("open file limit", "xds_address", "127.0.0.1:1") // not the start-up line
			if _, ok := startedAddrs(b.String()); ok {
				t.Fatalf("found addresses in %q", b.String())
			}
			log.Info(startedMsg, "xds_address", want.xds, "admin_address", want.admin, "console", "http://127.0.0.1:41002/ui/",
				"discovery", "static", "ratelimit_address", want.rateLimit, "xds_tls", false)
			got, ok := startedAddrs(b.String())
			if !ok || got != want {
				t.Errorf("startedAddrs = %+v, %v; want %+v\nlogs:\n%s", got, ok, want, b.String())
			}
		})
	}
}

// TestStartServerOnPortZero: the harness hands the process port 0 for each
// listener, so no other process can take a port between the choice and
// the bind, and the addresses it reads back are the ones served.
func TestStartServerOnPortZero(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	s := StartServer(t)
	for _, flag := range []string{"--xds.address", "--admin.address", "--ratelimit.address"} {
		i := slices.Index(s.cmd.Args, flag)
		if i < 0 || s.cmd.Args[i+1] != anyPort {
			t.Errorf("args %q: %s is not %s", s.cmd.Args, flag, anyPort)
		}
	}
	seen := map[string]bool{}
	for _, addr := range []string{s.XDSAddr, s.AdminAddr, s.RateLimitAddr} {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" || seen[addr] {
			t.Errorf("address %q (of %q, %q, %q): not a distinct chosen port", addr, s.XDSAddr, s.AdminAddr, s.RateLimitAddr)
		}
		seen[addr] = true
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Errorf("dial %s: %v", addr, err)
			continue
		}
		c.Close()
	}
}

// TestStartServerRetriesATakenPort: the port PortArgs gets first is taken
// (held by this test, as another process could take it after the choice):
// the process exits with "address already in use", and the harness starts
// it again on a fresh port.
func TestStartServerRetriesATakenPort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the binary")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var picked []string
	pick := func() (string, error) {
		if len(picked) == 0 {
			picked = append(picked, taken.Addr().String())
			return picked[0], nil
		}
		addr, err := freeAddr()
		picked = append(picked, addr)
		return addr, err
	}
	s := StartServerWith(t, ServerOptions{pick: pick, PortArgs: func(addr string) []string {
		return []string{"--ratelimit.address", addr, "--ratelimit.advertise_address", addr}
	}})
	if len(picked) != 2 {
		t.Fatalf("picked %q, want the taken port then a free one", picked)
	}
	if s.RateLimitAddr != picked[1] {
		t.Errorf("rate-limit listener on %s, want the second pick %s", s.RateLimitAddr, picked[1])
	}
	c, err := net.Dial("tcp", s.RateLimitAddr)
	if err != nil {
		t.Fatalf("dial the rate-limit listener: %v", err)
	}
	c.Close()
}
