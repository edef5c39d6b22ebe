package xdscache

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
)

// propertySeeds is how many random sequences TestCacheProperty runs per
// protocol and client kind (go test ./xds -run TestCacheProperty
// -args -cache-property-seeds 1000 for a long run).
var (
	propertySeeds = flag.Int("cache-property-seeds", 40, "random sequences per case of TestCacheProperty")
	propertySeed  = flag.Int("cache-property-seed", -1, "run only this sequence of TestCacheProperty (to debug it)")
)

// TestCacheProperty runs model clients (cache_model_test.go) of every
// kind, SotW and delta, against the real nodeCache over random sequences
// of snapshot changes (services, endpoints, cluster settings, listeners
// and routes added, removed, modified; snapshots with nothing new), ACKs
// and NACKs, reconnects that resume and that do not, and subscription
// changes, delivering responses and requests in random interleavings.
// After every step, once the stream is quiet, what the client has
// assembled equals what its node's snapshot holds for what it asks; and
// every response was checked on arrival: it carried what differed from
// the client's view (SotW load assignments and route configurations:
// only that), and it came only when something differed.
func TestCacheProperty(t *testing.T) {
	seeds := *propertySeeds
	if testing.Short() {
		seeds = min(seeds, 8)
	}
	for _, mode := range []struct {
		name             string
		delta, fullState bool
	}{{"sotw", false, false}, {"sotw-full-state", false, true}, {"delta", true, false}} {
		for _, kind := range []clientKind{envoyClient, grpcClient, wildcardClient} {
			t.Run(mode.name+"/"+kind.String(), func(t *testing.T) {
				for seed := range uint64(seeds) {
					if *propertySeed >= 0 && seed != uint64(*propertySeed) {
						continue
					}
					if err := runCacheProperty(seed, kind, mode.delta, mode.fullState, 60); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
				}
			})
		}
	}
}

// runCacheProperty runs one random sequence of steps; it returns the
// first violation with the steps that led to it.
func runCacheProperty(seed uint64, kind clientKind, delta, fullState bool, steps int) error {
	rng := rand.New(rand.NewPCG(seed, uint64(kind)<<8|map[bool]uint64{true: 1}[delta]<<1|map[bool]uint64{true: 1}[fullState]))
	w, err := newPropWorld(rng)
	if err != nil {
		return err
	}
	c := New(fullState)
	id := "node-" + kind.String()
	node := &core.Node{Id: id, UserAgentName: kind.agent()}
	client := newModelClient(kind, delta, rng, 0.15)
	hist := &propHistory{epochOf: map[*cache.Snapshot]int{}, changes: map[string][]int{}, losses: map[string][]int{}}
	client.hist = hist
	var log []string
	fail := func(err error) error {
		trace := client.trace[max(0, len(client.trace)-90):]
		return fmt.Errorf("%w\nsteps:\n  %s\nlast messages:\n  %s", err, strings.Join(log, "\n  "), strings.Join(trace, "\n  "))
	}
	var snap *cache.Snapshot
	var sim streamSim
	set := func(what string) error {
		s, err := w.snapshot(kind == envoyClient)
		if err != nil {
			return err
		}
		epoch := len(hist.epochOf) + 1
		hist.epochOf[s] = epoch
		for _, t := range propTypes {
			if snap == nil || snap.GetVersion(t) == s.GetVersion(t) {
				continue
			}
			hist.changes[t] = append(hist.changes[t], epoch)
			for name := range snap.GetResourcesAndTTL(t) {
				if _, ok := s.GetResourcesAndTTL(t)[name]; !ok {
					hist.losses[t] = append(hist.losses[t], epoch)
					break
				}
			}
		}
		snap = s
		log = append(log, fmt.Sprintf("snapshot (%s): %s", what, w))
		client.tracef("--- snapshot (%s): %s", what, w)
		if err := c.SetSnapshot(id, snap); err != nil {
			return err
		}
		if sim != nil {
			sim.tag(snap, client.made)
		}
		return nil
	}
	current := func() *cache.Snapshot { return snap }
	open := func(resume bool) {
		if sim != nil {
			sim.close()
		}
		if delta {
			sim = &deltaSimStream{newDeltaSim(c, node)}
		} else {
			sim = &sotwSimStream{newSotwSim(c, node)}
		}
		client.tracef("--- connect (resume %v)", resume)
		client.connect(resume)
		log = append(log, fmt.Sprintf("connect (resume %v)", resume))
	}
	// The node may connect before it has a snapshot.
	if rng.IntN(3) == 0 {
		open(false)
		if err := settle(rng, sim, client, current, nil, fullState); err != nil {
			return fail(err)
		}
		if err := set("first"); err != nil {
			return fail(err)
		}
	} else {
		if err := set("first"); err != nil {
			return fail(err)
		}
		open(false)
	}
	for step := range steps {
		// Now and then the snapshot changes while responses of the last
		// one are on their way (at most twice a step).
		changes := 0
		change := func() (bool, error) {
			if changes == 2 {
				return false, nil
			}
			changes++
			return true, set("in flight: " + w.mutate())
		}
		if err := settle(rng, sim, client, current, change, fullState); err != nil {
			return fail(fmt.Errorf("step %d: %w", step, err))
		}
		client.check(snap)
		if len(client.errs) > 0 {
			return fail(fmt.Errorf("step %d: %s", step, strings.Join(client.errs, "; ")))
		}
		switch r := rng.IntN(12); {
		case r < 6:
			what := w.mutate()
			if err := set(what); err != nil {
				return fail(err)
			}
		case r < 7:
			if err := set("same content"); err != nil { // a new snapshot, nothing new in it
				return fail(err)
			}
		case r < 9 && kind == grpcClient:
			typeURL := propTypes[rng.IntN(len(propTypes))]
			names := client.randomNames(typeURL)
			log = append(log, fmt.Sprintf("%s names %v", TypeName(typeURL), names))
			client.resubscribe(typeURL, names)
		case r < 11:
			open(true)
		default:
			open(false)
		}
	}
	return nil
}

// streamSim is a sotwSim or deltaSim as settle drives it.
type streamSim interface {
	pending() int                                // responses made, not sent
	sendOne(rng *rand.Rand) (simResponse, error) // sends one: it is on its way to the client
	request(req any) (bool, error)               // false: ignored
	tag(snap *cache.Snapshot, knows func(typeURL string) server)
	close()
}

type sotwSimStream struct{ *sotwSim }

func (s *sotwSimStream) pending() int { return len(s.sotwSim.pending()) }

func (s *sotwSimStream) sendOne(rng *rand.Rand) (simResponse, error) {
	p := s.sotwSim.pending()
	return s.send(p[rng.IntN(len(p))]) // the server's select picks any ready watch
}

func (s *sotwSimStream) request(req any) (bool, error) {
	return s.sotwSim.request(req.(*discoverygrpc.DiscoveryRequest))
}

type deltaSimStream struct{ *deltaSim }

func (s *deltaSimStream) sendOne(*rand.Rand) (simResponse, error) { return s.send() }

func (s *deltaSimStream) request(req any) (bool, error) {
	return true, s.deltaSim.request(req.(*discoverygrpc.DeltaDiscoveryRequest))
}

// settle delivers responses and requests, in a random interleaving, until
// neither is left. snap returns the node's snapshot (nil: none yet);
// change, if not nil, may set a new one meanwhile (with responses of the
// older one on their way) and returns whether it did.
func settle(rng *rand.Rand, sim streamSim, client *modelClient, snap func() *cache.Snapshot, change func() (bool, error), fullState bool) error {
	_, delta := sim.(*deltaSimStream)
	var transit []simResponse // sent, not read yet: a stream delivers in order
	for range 20000 {
		if change != nil && rng.IntN(12) == 0 {
			changed, err := change()
			if err != nil {
				return err
			}
			if changed {
				sim.tag(snap(), client.made)
			}
		}
		pending, queued := sim.pending(), len(client.queue)
		if pending == 0 && queued == 0 && len(transit) == 0 {
			return nil
		}
		switch a := rng.IntN(3); {
		case a == 0 && pending > 0:
			r, err := sim.sendOne(rng)
			if err != nil {
				return err
			}
			if r.snap == nil {
				return fmt.Errorf("a response before the node has a snapshot")
			}
			client.sent(r)
			transit = append(transit, r)
		case a == 1 && len(transit) > 0:
			r := transit[0]
			transit = transit[1:]
			client.receive(r, fullState)
		case a == 2 && queued > 0:
			if delta {
				// The delta server sends every waiting response before
				// it reads the next request.
				for sim.pending() > 0 {
					r, err := sim.sendOne(rng)
					if err != nil {
						return err
					}
					client.sent(r)
					transit = append(transit, r)
				}
			}
			if err := serve(sim, client, snap()); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("the stream never went quiet")
}

// serve has the server read the client's next request.
func serve(sim streamSim, client *modelClient, cur *cache.Snapshot) error {
	req := client.queue[0]
	client.queue = client.queue[1:]
	if r, ok := req.(*discoverygrpc.DiscoveryRequest); ok && r.GetResponseNonce() == "" && cur != nil {
		st := client.types[r.GetTypeUrl()]
		if t := r.GetTypeUrl(); t == resource.ClusterType || t == resource.ListenerType {
			// what the server notes for the types they refer to (resume.go)
			client.staleRef[t] = r.GetVersionInfo() != cur.GetVersion(t)
		}
		switch {
		case r.GetVersionInfo() != cur.GetVersion(r.GetTypeUrl()):
			st.uncertain = true // the first answer of the type on this stream is full state
		case client.resume && st.answers == 0 && (st.wildcard || client.kind == envoyClient) && client.staleRef[referrerURL(r.GetTypeUrl())]:
			clear(st.known) // each first request is judged anew: the server now takes the node to have nothing
		case client.resume && st.answers == 0 && (st.wildcard || client.kind == envoyClient):
			for name := range cur.GetResourcesAndTTL(r.GetTypeUrl()) {
				st.known[name] = true // the server takes it that the node has the snapshot's
			}
		}
	}
	ok, err := sim.request(req)
	if err != nil {
		return err
	}
	if ok {
		client.processed(req) // the server reads the request, then answers it
	}
	sim.tag(cur, client.made)
	return nil
}

// propWorld generates the snapshots of the property test: up to five
// services with a few endpoints, some unhealthy, with round_robin or
// ring_hash, and two configured listeners (on or off), in one of two
// variants (same names, other routes).
type propWorld struct {
	rng     *rand.Rand
	svcs    [5]propService
	variant int
	on      [2]bool
	sets    [2]*listenerSet
}

type propService struct {
	on        bool
	endpoints int
	down      int // index of the unhealthy endpoint; -1: none
	ring      bool
}

func newPropWorld(rng *rand.Rand) (*propWorld, error) {
	w := &propWorld{rng: rng}
	for v := range w.sets {
		ls := testListeners()
		if v == 1 {
			ls[0].Routes[0].Timeout = 7 * time.Second
			ls[1].Routes[0].Prefix = "/v1"
		}
		set, err := newListenerSet(ls, "127.0.0.1:18081")
		if err != nil {
			return nil, err
		}
		w.sets[v] = set
	}
	for i := range w.svcs {
		w.svcs[i] = propService{on: rng.IntN(3) > 0, endpoints: 1 + rng.IntN(3), down: rng.IntN(3) - 1}
	}
	w.on = [2]bool{rng.IntN(2) == 0, rng.IntN(2) == 0}
	return w, nil
}

// mutate changes one thing and says what.
func (w *propWorld) mutate() string {
	i := w.rng.IntN(len(w.svcs))
	s := &w.svcs[i]
	switch w.rng.IntN(7) {
	case 0:
		s.on = !s.on
		return fmt.Sprintf("svc-%03d on=%v", i, s.on)
	case 1:
		s.endpoints = 1 + w.rng.IntN(3)
		return fmt.Sprintf("svc-%03d endpoints=%d", i, s.endpoints)
	case 2, 3:
		s.down = w.rng.IntN(s.endpoints+1) - 1
		return fmt.Sprintf("svc-%03d down=%d", i, s.down)
	case 4:
		s.ring = !s.ring
		return fmt.Sprintf("svc-%03d ring=%v", i, s.ring)
	case 5:
		l := w.rng.IntN(2)
		w.on[l] = !w.on[l]
		return fmt.Sprintf("listener %d on=%v", l, w.on[l])
	}
	w.variant = 1 - w.variant
	return fmt.Sprintf("listener variant %d", w.variant)
}

func (w *propWorld) String() string {
	var b strings.Builder
	for i, s := range w.svcs {
		if s.on {
			fmt.Fprintf(&b, "svc-%03d(%d,%d,%v) ", i, s.endpoints, s.down, s.ring)
		}
	}
	fmt.Fprintf(&b, "listeners %v variant %d", w.on, w.variant)
	return b.String()
}

// snapshot builds the snapshot of an Envoy or a proxyless node, as the
// reconciler does (translate, then the assembly key's base).
func (w *propWorld) snapshot(envoyNode bool) (*cache.Snapshot, error) {
	var items []ServiceItems
	for i, s := range w.svcs {
		if !s.on {
			continue
		}
		svc := discovery.Service{Name: fmt.Sprintf("svc-%03d", i)}
		for j := range s.endpoints {
			h := discovery.HealthHealthy
			if j == s.down {
				h = discovery.HealthUnhealthy
			}
			svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{ID: fmt.Sprintf("svc-%03d-%d", i, j),
				Address: fmt.Sprintf("10.0.%d.%d", i, j+1), Port: 8080, Health: h})
		}
		var set translate.ServiceSettings
		if s.ring {
			set.LBPolicy = envoy.RingHash
		}
		it, err := encode(translate.Service(svc, set, nil))
		if err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	SortByName(items)
	key := keyProxyless
	if envoyNode {
		key = keyEnvoy
	}
	var on []string
	for l, ok := range w.on {
		if ok {
			on = append(on, fmt.Sprint(l))
		}
	}
	if len(on) > 0 {
		key += ":" + strings.Join(on, ",")
	}
	return w.sets[w.variant].base(key, items)
}

// referrerURL is the type whose resources name those of typeURL (see
// referrerOf), or "".
func referrerURL(typeURL string) string {
	switch typeURL {
	case resource.EndpointType:
		return resource.ClusterType
	case resource.RouteType:
		return resource.ListenerType
	}
	return ""
}
