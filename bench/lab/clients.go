package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
)

// arrivals draws the gaps of a Poisson process of rate requests/s
// (exponential gaps), reproducible from seed, the lab's run and the
// client's index.
type arrivals struct {
	rng  *rand.Rand
	rate float64 // > 0
}

// newArrivals is client's arrivals in run (0-based) of the lab: each run
// its own stream, run 0 the one a single run has always drawn, so that
// runs are independent samples of the arrivals' noise and --runs 1 is
// the lab as before.
func newArrivals(seed uint64, run, client int, rate float64) *arrivals {
	stream := 0xa771 + uint64(client) + uint64(run)<<32
	return &arrivals{rng: rand.New(rand.NewPCG(seed, stream)), rate: rate}
}

// next is the time to the next request.
func (a *arrivals) next() time.Duration {
	return time.Duration(a.rng.ExpFloat64() / a.rate * float64(time.Second))
}

// client is one grpc-go xDS client: its own node, its own xDS client.
type client struct {
	index int
	rate  float64 // requests/s
	conn  *grpc.ClientConn
	stub  testgrpc.TestServiceClient

	mu        sync.Mutex
	latencies []float64            // ms, of the successful requests
	codes     map[codes.Code]int64 // of the failed requests
	served    map[servedAt]int64   // successful requests by the backend that served them and the second they were sent in
	errors    atomic.Int64
	sent      atomic.Int64

	t0     time.Time // the run's start (diagnostics)
	errAt  timeline  // failed requests by the second they were sent in
	slowAt timeline  // requests over slowCall, likewise
}

// servedAt is a backend's address (the call's peer) and a second of the
// run: what the zone lab counts requests by.
type servedAt struct {
	addr string
	sec  int
}

// slowCall is the latency over which a successful call counts as slow in
// the diagnostics.
const slowCall = time.Second

// bootstrap is the gRPC xDS bootstrap of client i in zone: node
// lab-client-<i> in cluster lab, with its subset index in its metadata
// (subsetting.index_source metadata), so that client i has the
// simulator's subset i.
func bootstrap(xdsAddr string, i int, zone string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3"]}],
  "node": {"id": "lab-client-%d", "cluster": "lab", "locality": {"zone": %q}, "metadata": {"subset": {"index": %d}}}
}`, xdsAddr, i, zone, i)
}

// dialClients dials one xDS client per rate (xds:///lab) and warms each
// up (warmUp); client i's node is in zones[i] (zone "lab" when zones is
// nil).
func dialClients(ctx context.Context, xdsAddr string, rates []float64, zones []string) ([]*client, error) {
	var cs []*client
	for i, r := range rates {
		zone := "lab"
		if zones != nil {
			zone = zones[i]
		}
		rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrap(xdsAddr, i, zone))
		if err != nil {
			closeClients(cs)
			return nil, fmt.Errorf("lab: client %d: %w", i, err)
		}
		conn, err := grpc.NewClient("xds:///"+service, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(rb))
		if err != nil {
			closeClients(cs)
			return nil, fmt.Errorf("lab: client %d: %w", i, err)
		}
		cs = append(cs, &client{index: i, rate: r, conn: conn, stub: testgrpc.NewTestServiceClient(conn)})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for k, c := range cs {
		wg.Go(func() { errs[k] = c.warmUp(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeClients(cs)
		return nil, err
	}
	return cs, nil
}

// warmUpCalls are the calls, one after the other, a client makes before
// the run: ring_hash connects to an endpoint only once a pick lands on it
// and sends the pick to the next ready one meanwhile, so a client that
// starts at full rate at once piles onto its first connected endpoint.
// A few sequential calls with random hashes connect its whole subset.
const warmUpCalls = 16

// warmUp makes warmUpCalls calls, waiting for the client's config and
// endpoints.
func (c *client) warmUp(ctx context.Context) error {
	for range warmUpCalls {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := c.stub.EmptyCall(cctx, &testgrpc.Empty{}, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return fmt.Errorf("lab: client %d: warm-up call: %w", c.index, err)
		}
	}
	return nil
}

func closeClients(cs []*client) {
	for _, c := range cs {
		c.conn.Close()
	}
}

// run sends requests open loop until ctx ends: Poisson arrivals at the
// client's rate, each request on its own goroutine with deadline timeout,
// whatever the backends' latency. It returns when every request it sent
// has finished.
func (c *client) run(ctx context.Context, a *arrivals, timeout time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(a.next())
	defer timer.Stop()
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		c.sent.Add(1)
		wg.Go(func() { c.call(timeout) })
		next = next.Add(a.next())
		timer.Reset(time.Until(next))
	}
}

// call makes one request (its own deadline, not the run's: requests in
// flight at the end finish) and records its latency or error.
func (c *client) call(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	var from peer.Peer
	if _, err := c.stub.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Peer(&from)); err != nil {
		c.errors.Add(1)
		c.mu.Lock()
		if c.codes == nil {
			c.codes = map[codes.Code]int64{}
		}
		c.codes[status.Code(err)]++
		c.mu.Unlock()
		c.errAt.add(c.t0, start)
		return
	}
	if time.Since(start) > slowCall {
		c.slowAt.add(c.t0, start)
	}
	ms := float64(time.Since(start).Microseconds()) / 1000
	c.mu.Lock()
	c.latencies = append(c.latencies, ms)
	if from.Addr != nil && !c.t0.IsZero() { // not the warm-up's
		if c.served == nil {
			c.served = map[servedAt]int64{}
		}
		c.served[servedAt{from.Addr.String(), int(start.Sub(c.t0) / time.Second)}]++
	}
	c.mu.Unlock()
}
