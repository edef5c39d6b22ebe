package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/xds-server/xds-server/e2e/harness"
)

// ---- Traffic ----

// rpcRecord is one finished RPC.
type rpcRecord struct {
	id         int64
	node       string
	delay      time.Duration // x-delay-ms; 0 for a short call
	start, end time.Time
	peer       string // address of the backend the call went to ("" if unknown)
	server     string // server_id of the answer ("" on error)
	err        error
}

func (r rpcRecord) kind() string {
	if r.delay > 0 {
		return fmt.Sprintf("long (%v)", r.delay)
	}
	return "short"
}

// traffic sends a continuous stream of RPCs through grpc-go xDS clients:
// per client, ldShortWorkers goroutines of short calls and ldLongWorkers
// goroutines of long-running calls.
type traffic struct {
	quit    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	nextID  int64
	recs    []rpcRecord
	live    map[int64]string // long calls started on a backend (headers received), by id: peer address
	changed chan struct{}    // closed and replaced at every change of recs or live
	stopped bool
}

func startTraffic(t *testing.T, nodes []string, conns []*grpc.ClientConn) *traffic {
	tr := &traffic{quit: make(chan struct{}), live: map[int64]string{}, changed: make(chan struct{})}
	for i, conn := range conns {
		for range ldShortWorkers {
			tr.wg.Go(func() {
				// Paced, so that the load leaves CPU to xds-server,
				// Consul and the backends on a small machine.
				tick := time.NewTicker(ldShortPace)
				defer tick.Stop()
				for {
					select {
					case <-tr.quit:
						return
					case <-tick.C:
					}
					tr.call(nodes[i], conn, 0)
				}
			})
		}
		for range ldLongWorkers {
			tr.wg.Go(func() {
				for {
					select {
					case <-tr.quit:
						return
					default:
					}
					tr.call(nodes[i], conn, time.Duration(300+rand.IntN(501))*time.Millisecond)
				}
			})
		}
	}
	t.Cleanup(func() { tr.stop() })
	return tr
}

// call makes one UnaryCall (as a stream, to see its backend while it runs)
// and records it.
func (tr *traffic) call(node string, conn *grpc.ClientConn, delay time.Duration) {
	tr.mu.Lock()
	tr.nextID++
	r := rpcRecord{id: tr.nextID, node: node, delay: delay}
	tr.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), ldWait)
	defer cancel()
	if delay > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-delay-ms", strconv.FormatInt(delay.Milliseconds(), 10))
	}
	r.start = time.Now()
	r.err = func() error {
		st, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "UnaryCall"}, "/grpc.testing.TestService/UnaryCall")
		if err != nil {
			return err
		}
		// On io.EOF, the status of the call is RecvMsg's error.
		if err := st.SendMsg(&testgrpc.SimpleRequest{}); err != nil && err != io.EOF {
			return err
		}
		if err := st.CloseSend(); err != nil {
			return err
		}
		if delay > 0 {
			// The backend sends the headers of a long call at once:
			// from here on the call is in flight on that backend.
			if _, err := st.Header(); err != nil {
				return err
			}
			if p, ok := peer.FromContext(st.Context()); ok {
				r.peer = p.Addr.String()
				tr.update(func() { tr.live[r.id] = r.peer })
			}
		}
		resp := new(testgrpc.SimpleResponse)
		if err := st.RecvMsg(resp); err != nil {
			return err
		}
		if p, ok := peer.FromContext(st.Context()); ok {
			r.peer = p.Addr.String()
		}
		r.server = resp.GetServerId()
		return nil
	}()
	r.end = time.Now()
	tr.update(func() {
		delete(tr.live, r.id)
		tr.recs = append(tr.recs, r)
	})
}

// update applies f under the lock and wakes the waiters.
func (tr *traffic) update(f func()) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	f()
	close(tr.changed)
	tr.changed = make(chan struct{})
}

// await waits, within ldWait, until cond holds. cond runs under the lock
// at every change, with the records finished since its previous run and
// the long calls in flight.
func (tr *traffic) await(t *testing.T, what string, cond func(newRecs []rpcRecord, live map[int64]string) bool) {
	t.Helper()
	timeout := time.After(ldWait)
	seen := 0
	for {
		tr.mu.Lock()
		ok := cond(tr.recs[seen:], tr.live)
		seen = len(tr.recs)
		changed := tr.changed
		tr.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			tr.mu.Lock()
			n, failed := len(tr.recs), 0
			for _, r := range tr.recs {
				if r.err != nil {
					failed++
				}
			}
			tr.mu.Unlock()
			t.Fatalf("traffic: no %s within %v (%d RPCs so far, %d failed)", what, ldWait, n, failed)
		}
	}
}

// liveOn returns the ids of the long calls in flight on the backend at addr.
func (tr *traffic) liveOn(addr string) []int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.liveOnLocked(addr)
}

func (tr *traffic) liveOnLocked(addr string) []int64 {
	var ids []int64
	for id, a := range tr.live {
		if a == addr {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// stop stops starting RPCs, waits for those in flight to finish (no call
// is cancelled) and returns every record. Later calls return the same.
func (tr *traffic) stop() []rpcRecord {
	tr.mu.Lock()
	if !tr.stopped {
		tr.stopped = true
		close(tr.quit)
	}
	tr.mu.Unlock()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.recs)
}

// ---- Checks of the records ----

// awaitTrafficAfter waits until every client has made n successful RPCs
// started after from.
func (e *lameDuckEnv) awaitTrafficAfter(t *testing.T, tr *traffic, from time.Time, n int) {
	t.Helper()
	count := map[string]int{}
	tr.await(t, fmt.Sprintf("%d RPCs per client started after %s", n, from.Format("15:04:05.000")), func(recs []rpcRecord, _ map[int64]string) bool {
		for _, r := range recs {
			if r.err == nil && r.start.After(from) {
				count[r.node]++
			}
		}
		for _, node := range e.nodes {
			if count[node] < n {
				return false
			}
		}
		return true
	})
}

// awaitHitsAfter waits until every client has had a successful RPC started
// after from on every backend of ids.
func (e *lameDuckEnv) awaitHitsAfter(t *testing.T, tr *traffic, ids []string, from time.Time) {
	t.Helper()
	hit := map[[2]string]bool{}
	tr.await(t, fmt.Sprintf("every client to reach %v", ids), func(recs []rpcRecord, _ map[int64]string) bool {
		for _, r := range recs {
			if r.err == nil && r.start.After(from) {
				hit[[2]string{r.node, r.server}] = true
			}
		}
		for _, node := range e.nodes {
			for _, id := range ids {
				if !hit[[2]string{node, id}] {
					return false
				}
			}
		}
		return true
	})
}

// checkNoFailures fails the test for every failed RPC.
func checkNoFailures(t *testing.T, recs []rpcRecord) {
	t.Helper()
	var failed []string
	for _, r := range recs {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("%s %s RPC started %s on %q: %v",
				r.node, r.kind(), r.start.Format("15:04:05.000"), r.peer, r.err))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d RPCs failed, want 0; first ones:\n%s", len(failed), len(recs), strings.Join(failed[:min(len(failed), 10)], "\n"))
	}
}

// checkDrained checks that no RPC started more than ldNewRPCLimit after
// from (and before until, if set) landed on b, and that the RPCs in flight
// on b at from (inflight) completed on b without error. It returns when,
// after from, the last RPC that landed on b started (-1 if none did).
func checkDrained(t *testing.T, recs []rpcRecord, b *harness.ExBackend, from, until time.Time, inflight []int64) time.Duration {
	t.Helper()
	last := time.Duration(-1)
	late := 0
	for _, r := range recs {
		if r.server != b.ID || !r.start.After(from) || (!until.IsZero() && r.start.After(until)) {
			continue
		}
		last = max(last, r.start.Sub(from))
		if r.start.Sub(from) > ldNewRPCLimit {
			if late++; late <= 5 {
				t.Errorf("%s %s RPC started %v after %s was drained landed on it; want none after %v",
					r.node, r.kind(), r.start.Sub(from), b.ID, ldNewRPCLimit)
			}
		}
	}
	if late > 5 {
		t.Errorf("... %d such RPCs in all", late)
	}
	byID := map[int64]rpcRecord{}
	for _, r := range recs {
		byID[r.id] = r
	}
	for _, id := range inflight {
		r, ok := byID[id]
		switch {
		case !ok:
			t.Errorf("RPC %d in flight on %s at the drain never finished", id, b.ID)
		case r.err != nil || r.server != b.ID:
			t.Errorf("RPC in flight on %s at the drain (%s, %s): server %q, error %v; want an answer from %s",
				b.ID, r.node, r.kind(), r.server, r.err, b.ID)
		}
	}
	return last
}

// lastRPCString formats a result of checkDrained.
func lastRPCString(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return "started " + d.Round(100*time.Microsecond).String() + " after"
}

func countOn(recs []rpcRecord, id string) int {
	n := 0
	for _, r := range recs {
		if r.server == id {
			n++
		}
	}
	return n
}
