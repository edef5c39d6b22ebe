package harness

import (
	"context"
	"maps"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// GRPCLoad is a steady gRPC load: Workers goroutines, each calling
// grpc.testing.TestService/UnaryCall one call after another on one
// plaintext (h2c) connection to an address, such as an Envoy listener.
type GRPCLoad struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	res GRPCLoadResult
}

// GRPCLoadResult counts what a gRPC load got back.
type GRPCLoadResult struct {
	Total int
	// ByBackend counts successful calls by the server_id of the answer
	// (the example backend answers with its id).
	ByBackend map[string]int
	// Errors counts failed calls by status message.
	Errors map[string]int
}

// Failed is every call that did not succeed.
func (r GRPCLoadResult) Failed() int {
	n := 0
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// StartGRPCLoad starts workers (default 2) calling UnaryCall on addr,
// each call bounded by 5 s; Stop ends it.
func StartGRPCLoad(addr string, workers int) (*GRPCLoad, error) {
	if workers <= 0 {
		workers = 2
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &GRPCLoad{conn: conn, cancel: cancel, res: GRPCLoadResult{ByBackend: map[string]int{}, Errors: map[string]int{}}}
	client := testgrpc.NewTestServiceClient(conn)
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				resp, err := client.UnaryCall(cctx, &testgrpc.SimpleRequest{})
				ccancel()
				if ctx.Err() != nil {
					return // cut by Stop: not counted
				}
				l.mu.Lock()
				l.res.Total++
				if err != nil {
					l.res.Errors[err.Error()]++
				} else {
					l.res.ByBackend[resp.GetServerId()]++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l, nil
}

// Snapshot is what the load got so far.
func (l *GRPCLoad) Snapshot() GRPCLoadResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.res
	r.ByBackend, r.Errors = maps.Clone(r.ByBackend), maps.Clone(r.Errors)
	return r
}

// Stop ends the load, closes its connection and returns what it got.
func (l *GRPCLoad) Stop() GRPCLoadResult {
	l.cancel()
	l.wg.Wait()
	_ = l.conn.Close()
	return l.Snapshot()
}
