package e2e

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// Load for the traffic policy tests: a loader counting failed RPCs and a
// backend that fails every other call.

// loader sends RPCs from several goroutines until stopped, counting the
// ones that fail, and on demand the backends that serve a window of them.
type loader struct {
	ok, failed atomic.Int64
	cancel     context.CancelFunc
	wg         sync.WaitGroup

	mu       sync.Mutex
	firstErr error
	counts   map[string]int // the current window's; nil: none
	want     int            // RPCs the window still awaits
	full     chan struct{}  // closed when the window is full
}

// startLoader starts workers goroutines calling call; it stops at
// cleanup if not before.
func startLoader(t *testing.T, call callFunc, workers int) *loader {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loader{cancel: cancel}
	for range workers {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				id, err := call(rctx)
				rcancel()
				switch {
				case err == nil:
					l.ok.Add(1)
					l.served(id)
				case ctx.Err() != nil: // stopped mid-RPC: not a failure
				default:
					l.failed.Add(1)
					l.mu.Lock()
					if l.firstErr == nil {
						l.firstErr = err
					}
					l.mu.Unlock()
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// served counts an RPC served by id in the current window, if any.
func (l *loader) served(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.want == 0 {
		return
	}
	l.counts[id]++
	if l.want--; l.want == 0 {
		close(l.full)
	}
}

// window returns the backends that served the next n successful RPCs of
// the loader (at most 30 s away).
func (l *loader) window(t *testing.T, n int) map[string]int {
	t.Helper()
	l.mu.Lock()
	counts, full := map[string]int{}, make(chan struct{})
	l.counts, l.want, l.full = counts, n, full
	l.mu.Unlock()
	select {
	case <-full:
	case <-time.After(30 * time.Second):
		t.Fatalf("the loader did not make %d RPCs within 30s", n)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return counts
}

func (l *loader) stop() {
	l.cancel()
	l.wg.Wait()
}

// check fails the test if an RPC of l has failed so far (what: when).
func (l *loader) check(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.failed.Load(); n > 0 {
		t.Errorf("%s: %d of %d loader RPCs failed; the first: %v", what, n, n+l.ok.Load(), l.firstErr)
	} else {
		t.Logf("%s: %d loader RPCs, 0 failed", what, l.ok.Load())
	}
}

// flakyBackend is a grpc.testing.TestService backend whose UnaryCall
// answers UNAVAILABLE on every other call (the 1st, 3rd, ...), as a
// backend whose dependency is briefly unreachable does; it counts calls.
type flakyBackend struct {
	testgrpc.UnimplementedTestServiceServer
	id    string
	calls atomic.Int64
}

// startFlaky serves a flakyBackend on a free loopback port until cleanup.
func startFlaky(t *testing.T, id string) (*flakyBackend, string, int) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &flakyBackend{id: id}
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f, "127.0.0.1", lis.Addr().(*net.TCPAddr).Port
}

func (f *flakyBackend) UnaryCall(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if f.calls.Add(1)%2 == 1 {
		return nil, status.Error(codes.Unavailable, "flaky: every other call fails")
	}
	return &testgrpc.SimpleResponse{ServerId: f.id}, nil
}
