package main

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/ha"
)

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestServeFailureReleasesWhatItAcquired runs serve with HA on a real
// Consul and a rate-limit address already taken: the step that fails
// comes after the HA alive check was registered and the client index
// table took a session. serve must return the listener's error with
// nothing left behind: no alive check and no session in Consul, the xDS
// and admin ports free again.
func TestServeFailureReleasesWhatItAcquired(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Consul")
	}
	consul := harness.Consul(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	xdsAddr, adminAddr := freeAddr(t), freeAddr(t)
	cfg, err := loadArgs(t, "--discovery.source", "consul", "--discovery.consul.address", consul.Addr(),
		"--ha.enabled", "--ha.consul.prefix", "serve-test/", "--subsetting.index_source", "consul",
		"--xds.address", xdsAddr, "--admin.address", adminAddr, "--ratelimit.address", taken.Addr().String(),
		"--log.level", "info")
	if err != nil {
		t.Fatal(err)
	}
	defer slog.SetDefault(slog.Default())
	var logs lockedBuffer
	err = serve(cfg, &logs)
	if err == nil || !strings.Contains(err.Error(), "ratelimit listener") {
		t.Fatalf("serve: %v, want the rate-limit listener's error", err)
	}
	if !strings.Contains(logs.String(), "high availability on") || strings.Contains(logs.String(), "alive check not registered") {
		t.Fatalf("the alive check was not registered before the failing step; logs:\n%s", logs.String())
	}
	checks, err := consul.Client().Agent().Checks()
	if err != nil {
		t.Fatal(err)
	}
	for id := range checks {
		if strings.HasPrefix(id, ha.AliveCheckPrefix) {
			t.Errorf("alive check %s still registered after serve failed", id)
		}
	}
	sessions, _, err := consul.Client().Session().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		t.Errorf("session %s (%s) still held after serve failed", s.ID, s.Name)
	}
	for _, addr := range []string{xdsAddr, adminAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still held after serve failed: %v", addr, err)
			continue
		}
		l.Close()
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}
