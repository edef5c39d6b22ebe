package harness

import (
	"testing"
	"time"
)

// StartReplicas runs n xds-server processes with the same flags (each on
// its own free ports), as replicas of one control plane behind one
// Consul, and waits until each answers /healthz. They are stopped at
// cleanup like StartServer's.
func StartReplicas(t testing.TB, n int, args ...string) []*Server {
	t.Helper()
	out := make([]*Server, n)
	for i := range out {
		out[i] = StartServer(t, args...)
	}
	return out
}

// Kill ends the process with SIGKILL, as a crash would (no lame duck, no
// release of its Consul session or client indices), and waits until it
// has exited. Stop afterwards reports nothing.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.killed.Store(true)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill xds-server: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("xds-server did not exit within 10s of SIGKILL")
	}
}

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }
