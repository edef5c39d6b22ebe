package xdscache

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// The client end of a node's stream for the property test
// (cache_property_test.go; the server end is cache_sim_test.go).
// modelClient is a node: an Envoy (clusters and listeners wildcard, load
// assignments and route configurations named after what those refer to),
// a gRPC client naming what it chooses, or a wildcard subscriber to
// everything (the harness and bench clients). It ACKs or NACKs each
// response, assembles its view (SotW: clusters and listeners replaced,
// load assignments and route configurations merged by name; delta:
// applied) and checks each response against it and against what the
// server took it to have (server, updated as the server sends and reads).

// propTypes are the types a model client subscribes to, in ADS order.
var propTypes = []string{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType}

// clientKind is what kind of node a model client is.
type clientKind int

const (
	envoyClient    clientKind = iota // ADS: CDS and LDS wildcard, EDS and RDS named by reference
	grpcClient                       // names what it chooses, every type
	wildcardClient                   // wildcard everything (harness, bench)
)

func (k clientKind) String() string { return [...]string{"envoy", "grpc", "wildcard"}[k] }

func (k clientKind) agent() string {
	if k == envoyClient {
		return "envoy"
	}
	return "grpc-go/1.80.0"
}

// typeState is what a model client has and asks of one type.
type typeState struct {
	view      map[string][]byte // accepted resources, by name
	viewAt    map[string]int    // when (epoch) the snapshot of each was set
	viewEpoch int               // full state types: when the snapshot of the view was set
	wildcard  bool
	names     []string // subscribed names (not wildcard), sorted
	// serverNames are the names of the requests the server processed: a
	// response made before it processed the latest is for those.
	serverNames []string
	started     bool // a request of the type was sent on this stream
	// SotW
	server                         // what the server takes the client to have (see server)
	viewVersions map[string]string // delta: versions of the view (what a resuming client tells)
	rejected     map[string]bool   // names of NACKed resources not accepted since: the view may lag there
	limbo        map[string]bool   // dropped by a resumed stream before its first answer (resume.go's known limit)
	pruned       map[string]bool   // dropped with their cluster (listener), not received since
	version      string            // last accepted version_info
	shrunk       bool              // the server dropped names from what the stream has since its last response
	lastMade     int               // when the last response of the type on this stream was made (epoch)
	nonce        string            // last response's nonce
	answers      int               // responses received on this stream
	// the server cannot know what the client has after a NACK (SotW), or
	// after a reconnect it did not resume (first answers may repeat)
	uncertain bool
	nacked    bool // the last response was NACKed
	// delta
	// a delta wildcard subscription's first answer may be empty
	firstOK bool
}

// modelClient is one node's client.
type modelClient struct {
	kind   clientKind
	delta  bool
	rng    *rand.Rand
	nackP  float64
	types  map[string]*typeState
	queue  []any // requests not sent yet
	errs   []string
	trace  []string
	resume bool // the current stream resumed
	// staleRef: by type URL, the latest first cluster (listener) request
	// named another version than the snapshot's (resume.go)
	staleRef map[string]bool
	hist     *propHistory
}

// propHistory is what the test knows of the snapshots it set: when (in
// snapshots set) each was set, and when each type's version changed and
// when one of its resources left.
type propHistory struct {
	epochOf         map[*cache.Snapshot]int
	changes, losses map[string][]int // by type URL
}

// between counts the epochs of es in (from, to].
func between(es []int, from, to int) int {
	n := 0
	for _, e := range es {
		if e > from && e <= to {
			n++
		}
	}
	return n
}

func newModelClient(kind clientKind, delta bool, rng *rand.Rand, nackP float64) *modelClient {
	c := &modelClient{kind: kind, delta: delta, rng: rng, nackP: nackP, types: map[string]*typeState{}, staleRef: map[string]bool{}}
	for _, t := range propTypes {
		c.types[t] = &typeState{view: map[string][]byte{}, viewAt: map[string]int{}, viewVersions: map[string]string{},
			rejected: map[string]bool{}, limbo: map[string]bool{}, pruned: map[string]bool{}}
	}
	return c
}

func (c *modelClient) failf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
	c.tracef("!! "+format, args...)
}

// wildcardType reports whether the client subscribes to typeURL as a wildcard.
func (c *modelClient) wildcardType(typeURL string) bool {
	switch c.kind {
	case wildcardClient:
		return true
	case envoyClient:
		return typeURL == resource.ClusterType || typeURL == resource.ListenerType
	}
	return false
}

// connect starts a new stream: every type subscribed as the client's
// kind does, resuming (with what it has) or as a new node.
func (c *modelClient) connect(resume bool) {
	c.resume = resume
	c.queue = nil
	for _, t := range propTypes {
		st := c.types[t]
		if !resume {
			*st = typeState{view: map[string][]byte{}, viewAt: map[string]int{}, viewVersions: map[string]string{}, names: st.names,
				rejected: map[string]bool{}, limbo: map[string]bool{}, pruned: map[string]bool{}}
		}
		st.started, st.nonce, st.answers, st.nacked, st.serverNames, st.lastMade, st.shrunk = false, "", 0, false, nil, 0, false
		// What the server takes the client to have is per stream (a
		// resuming delta stream starts from what the client tells);
		// limbo and pruned follow the view.
		st.server = server{known: map[string]bool{}, believed: map[string][]byte{}, versions: map[string]string{}}
		st.uncertain = !resume
		st.wildcard = c.wildcardType(t)
	}
	for _, t := range propTypes {
		st := c.types[t]
		switch {
		case st.wildcard:
			c.start(t, nil)
		case c.kind == envoyClient:
			if names := c.refs(t); len(names) > 0 {
				c.start(t, names) // Envoy asks for what its clusters and listeners refer to
			}
		default:
			if st.names == nil {
				st.names = c.randomNames(t)
			}
			c.start(t, st.names)
		}
	}
}

// processed tells the client that the server processed req (the
// subscription the server knows).
func (c *modelClient) processed(req any) {
	switch r := req.(type) {
	case *discoverygrpc.DiscoveryRequest:
		st := c.types[r.GetTypeUrl()]
		st.serverNames = slices.Sorted(slices.Values(r.GetResourceNames()))
		if !st.wildcard {
			maps.DeleteFunc(st.known, func(n string, _ bool) bool {
				if slices.Contains(st.serverNames, n) {
					return false
				}
				st.shrunk = true // the server may have dropped the entry stamped with the stream's epoch (see stamp)
				return true
			})
		}
		c.tracef("server: %s request v=%q nonce=%q names=%v nack=%v", TypeName(r.GetTypeUrl()), r.GetVersionInfo(),
			r.GetResponseNonce(), r.GetResourceNames(), r.GetErrorDetail() != nil)
	case *discoverygrpc.DeltaDiscoveryRequest:
		st := c.types[r.GetTypeUrl()]
		for _, n := range r.GetResourceNamesUnsubscribe() {
			delete(st.believed, n) // the server forgets what a stream unsubscribes from
			delete(st.versions, n)
		}
		names := slices.Concat(st.serverNames, r.GetResourceNamesSubscribe())
		names = slices.DeleteFunc(names, func(n string) bool { return n == "*" || slices.Contains(r.GetResourceNamesUnsubscribe(), n) })
		slices.Sort(names)
		st.serverNames = slices.Compact(names)
		c.tracef("server: delta %s request nonce=%q +%v -%v initial=%v nack=%v", TypeName(r.GetTypeUrl()), r.GetResponseNonce(),
			r.GetResourceNamesSubscribe(), r.GetResourceNamesUnsubscribe(), r.GetInitialResourceVersions(), r.GetErrorDetail() != nil)
	}
}

func (c *modelClient) tracef(format string, args ...any) {
	c.trace = append(c.trace, fmt.Sprintf(format, args...))
}

// start queues the first request of a type on the stream.
func (c *modelClient) start(typeURL string, names []string) {
	st := c.types[typeURL]
	st.started = true
	if !st.wildcard {
		st.names = names
		c.keepNamed(typeURL)
	}
	if c.delta {
		req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: typeURL}
		switch {
		case st.wildcard && c.rng.IntN(2) == 0:
			// legacy wildcard: no names
		case st.wildcard:
			req.ResourceNamesSubscribe = []string{"*"}
		default:
			req.ResourceNamesSubscribe = slices.Clone(names)
		}
		if c.resume && len(st.viewVersions) > 0 {
			req.InitialResourceVersions = maps.Clone(st.viewVersions)
			for n, v := range st.viewVersions {
				st.believed[n], st.versions[n] = st.view[n], v // the server reads it first on the stream
			}
		}
		st.firstOK = st.wildcard && len(req.InitialResourceVersions) == 0
		c.queue = append(c.queue, req)
		return
	}
	req := &discoverygrpc.DiscoveryRequest{TypeUrl: typeURL}
	if !st.wildcard {
		req.ResourceNames = slices.Clone(names)
	}
	if c.resume {
		req.VersionInfo = st.version
	}
	c.queue = append(c.queue, req)
}

// resubscribe changes a named subscription (SotW: a new request with the
// last nonce; delta: subscribe and unsubscribe what changed).
func (c *modelClient) resubscribe(typeURL string, names []string) {
	st := c.types[typeURL]
	if !st.started {
		if len(names) > 0 {
			c.start(typeURL, names)
		}
		return
	}
	old := st.names
	st.names = names
	c.keepNamed(typeURL)
	if c.delta {
		req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: typeURL}
		for _, n := range names {
			if !slices.Contains(old, n) {
				req.ResourceNamesSubscribe = append(req.ResourceNamesSubscribe, n)
			}
		}
		for _, n := range old {
			if !slices.Contains(names, n) {
				req.ResourceNamesUnsubscribe = append(req.ResourceNamesUnsubscribe, n)
			}
		}
		if len(req.ResourceNamesSubscribe)+len(req.ResourceNamesUnsubscribe) > 0 {
			c.queue = append(c.queue, req)
		}
		return
	}
	if !slices.Equal(old, names) {
		c.queue = append(c.queue, &discoverygrpc.DiscoveryRequest{TypeUrl: typeURL, VersionInfo: st.version,
			ResponseNonce: st.nonce, ResourceNames: slices.Clone(names)})
	}
}

// keepNamed drops what a named subscription no longer names (a client
// forgets a resource it stops watching).
func (c *modelClient) keepNamed(typeURL string) {
	st := c.types[typeURL]
	if !c.delta && c.resume && st.answers == 0 {
		for n := range st.view {
			if !slices.Contains(st.names, n) {
				st.limbo[n] = true // see resume.go: dropped before the resumed stream's first answer
			}
		}
	}
	maps.DeleteFunc(st.view, func(n string, _ []byte) bool { return !slices.Contains(st.names, n) })
	maps.DeleteFunc(st.viewVersions, func(n string, _ string) bool { return !slices.Contains(st.names, n) })
}

// propNames are the names a gRPC client may choose from: those of the
// generated services and listeners, the RLS cluster, and one never
// served.
var propNames = []string{"svc-000", "svc-001", "svc-002", "svc-003", "svc-004", "ingress", "internal", "xds-server-ratelimit", "missing"}

func (c *modelClient) randomNames(string) []string {
	var out []string
	for _, n := range propNames {
		if c.rng.IntN(2) == 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = append(out, propNames[c.rng.IntN(len(propNames))])
	}
	slices.Sort(out)
	return out
}

// refs are the names an Envoy asks for of typeURL (EDS, RDS): what the
// clusters and listeners it has refer to.
func (c *modelClient) refs(typeURL string) []string {
	var out []string
	switch typeURL {
	case resource.EndpointType:
		for name, b := range c.types[resource.ClusterType].view {
			var cl clusterv3.Cluster
			if err := proto.Unmarshal(b, &cl); err != nil {
				c.failf("cluster %s: %v", name, err)
				continue
			}
			if cl.GetType() == clusterv3.Cluster_EDS {
				out = append(out, cmp.Or(cl.GetEdsClusterConfig().GetServiceName(), name))
			}
		}
	case resource.RouteType:
		for name, b := range c.types[resource.ListenerType].view {
			var l listenerv3.Listener
			if err := proto.Unmarshal(b, &l); err != nil {
				c.failf("listener %s: %v", name, err)
				continue
			}
			rs, err := routeRefs(&l)
			if err != nil {
				c.failf("listener %s: %v", name, err)
			}
			out = append(out, rs...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// referrer is the type whose resources refer to those of a merged type.
var propReferrer = map[string]string{resource.EndpointType: resource.ClusterType, resource.RouteType: resource.ListenerType}

// receive reads a response: checks it against the snapshot it was made
// from, ACKs or NACKs it, applies it and queues what the client asks
// next. fullState is the cache's mode.
func (c *modelClient) receive(r simResponse, fullState bool) {
	snap := r.snap
	st := c.types[r.typeURL]
	st.answers++
	c.tracef("client: %s response v=%q nonce=%s carries %v removes %v (made for %v)", TypeName(r.typeURL), r.version, r.nonce, r.order, r.removed, r.names)
	want := c.expected(r.typeURL, snap, r.names)
	inSync := st.wildcard || slices.Equal(st.names, r.names)
	if c.delta {
		c.checkDelta(r, st, want, inSync)
	} else {
		c.checkSotW(r, st, want, inSync, snap, fullState)
		st.lastMade, st.shrunk = c.hist.epochOf[snap], false
		for name := range r.res {
			delete(st.limbo, name)
			delete(st.pruned, name)
		}
	}
	nack := !st.nacked && c.rng.Float64() < c.nackP
	st.nacked = nack
	if c.delta {
		c.applyDelta(r, st, nack)
	} else {
		c.applySotW(r, st, nack)
	}
	if !st.wildcard {
		c.keepNamed(r.typeURL) // what it no longer names is ignored
	}
	if nack || c.kind != envoyClient {
		return
	}
	// Envoy asks for what its new clusters (listeners) refer to.
	switch r.typeURL {
	case resource.ClusterType:
		c.follow(resource.EndpointType)
	case resource.ListenerType:
		c.follow(resource.RouteType)
	}
}

// made is knows, for a response of typeURL the server just made: after
// a cluster (listener) response, the server no longer resumes the types
// that refer to them (resume.go).
func (c *modelClient) made(typeURL string) server {
	if typeURL == resource.ClusterType || typeURL == resource.ListenerType {
		c.staleRef[typeURL] = true
	}
	return c.knows(typeURL)
}

// knows is what the server takes the client to have of typeURL now.
func (c *modelClient) knows(typeURL string) server { return c.types[typeURL].server.clone() }

// sent updates what the server takes the client to have as it sends r
// (go-control-plane records a response's returned resources when it
// sends it).
func (c *modelClient) sent(r simResponse) {
	st := c.types[r.typeURL]
	if c.delta {
		maps.Copy(st.believed, r.res)
		maps.Copy(st.versions, r.versions)
		for _, n := range r.removed {
			delete(st.believed, n)
			delete(st.versions, n)
		}
		return
	}
	want := c.expected(r.typeURL, r.snap, r.names)
	if st.wildcard && len(r.res) == len(want) {
		clear(st.known) // full state: the server resets what it takes the client to have
	}
	if !st.wildcard && partial(cache.GetResponseType(r.typeURL)) {
		// the server forgets what left the snapshot (the client drops it with its cluster)
		maps.DeleteFunc(st.known, func(n string, _ bool) bool { _, ok := want[n]; return !ok })
	}
	for name := range r.res {
		st.known[name] = true
	}
}

func (c *modelClient) follow(typeURL string) {
	names := c.refs(typeURL)
	if !slices.Equal(names, c.types[typeURL].names) || !c.types[typeURL].started {
		c.resubscribe(typeURL, names)
	}
}

// checkSotW checks a SotW response: it carries what differs from the
// view, and only that for load assignments and route configurations
// (full state otherwise), unless the server cannot know what the client
// has, and it comes only when something differs. Only what the server was
// asked for can be checked while a request changing it is on its way
// (inSync false).
func (c *modelClient) checkSotW(r simResponse, st *typeState, want map[string][]byte, inSync bool, snap *cache.Snapshot, fullState bool) {
	kind := cache.GetResponseType(r.typeURL)
	if v := snap.GetVersion(r.typeURL); r.version != v {
		c.failf("%s response has version %q, the snapshot %q", TypeName(r.typeURL), r.version, v)
	}
	for name, b := range r.res {
		if w, ok := want[name]; !ok || !bytes.Equal(w, b) {
			c.failf("%s response carries %s, which is not what the node asked for", TypeName(r.typeURL), name)
		}
	}
	if !slices.IsSorted(r.order) {
		c.failf("%s response not sorted: %v", TypeName(r.typeURL), r.order)
	}
	if c.kind == envoyClient && !st.wildcard {
		for name := range snap.GetResourcesAndTTL(r.typeURL) {
			if !slices.Contains(st.serverNames, name) {
				c.failf("%s response to a request that does not name %s (ADS: only one naming every resource is answered)", TypeName(r.typeURL), name)
			}
		}
	}
	if r.wantFull && len(r.res) != len(want) {
		c.failf("%s response carries %v, want the full state %v (answer to a NACK or a first request)", TypeName(r.typeURL), r.order, slices.Sorted(maps.Keys(want)))
	}
	if !inSync {
		return
	}
	// What the client lacks or has otherwise, or what this stream was
	// never sent (the server cannot know the client has it).
	differs := func(name string) bool {
		v, ok := st.view[name]
		return !ok || !bytes.Equal(v, want[name]) || !r.known[name] || st.rejected[name]
	}
	lost := false // the server takes the client to have what the snapshot does not
	for name := range r.known {
		if _, ok := want[name]; !ok {
			lost = true
		}
	}
	uncertain := st.uncertain || st.nacked || (st.answers == 1 && c.kind == grpcClient) || st.shrunk && partial(kind)
	// An Envoy's version_info follows the snapshot's (see cache_sotw.go).
	moved := r.version != st.version && c.kind == envoyClient
	news := 0
	for name := range r.res {
		if differs(name) {
			news++
		}
	}
	made := c.hist.epochOf[snap]
	// A wildcard stream whose last response is older than a loss of the
	// type, or two changes back, is sent the full state (see holding).
	behind := st.answers > 1 && partial(kind) &&
		(between(c.hist.changes[r.typeURL], st.lastMade, made) >= 2 || between(c.hist.losses[r.typeURL], st.lastMade, made) > 0)
	if news == 0 && !lost && !uncertain && !moved && !behind {
		c.failf("%s response although the node has what it asks for (carries %v)", TypeName(r.typeURL), r.order)
	}
	full := len(r.res) == len(want)
	if fullState || !partial(kind) {
		if !full {
			c.failf("%s response carries %d of the %d resources the node asks for (full state)", TypeName(r.typeURL), len(r.res), len(want))
		}
		return
	}
	if uncertain || full && (st.wildcard && lost || behind) {
		return // the server cannot know (a NACK, a new stream), or full state for a wildcard that lost a resource (see holding)
	}
	for _, name := range r.order {
		if !differs(name) {
			c.failf("%s response carries %s, which the client has", TypeName(r.typeURL), name)
		}
	}
	for name := range want {
		if _, ok := r.res[name]; !ok && differs(name) && r.known[name] && !st.rejected[name] && !st.pruned[name] && !st.limbo[name] {
			c.failf("%s response omits %s, which changed", TypeName(r.typeURL), name)
		}
	}
}

// applySotW ACKs or NACKs a SotW response and applies an accepted one.
func (c *modelClient) applySotW(r simResponse, st *typeState, nack bool) {
	st.nonce = r.nonce
	req := &discoverygrpc.DiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce}
	if !st.wildcard {
		req.ResourceNames = slices.Clone(st.names)
	}
	if nack {
		req.VersionInfo = st.version
		req.ErrorDetail = &statuspb.Status{Code: 3, Message: "rejected by the model"}
		c.queue = append(c.queue, req)
		for n := range r.res {
			st.rejected[n] = true
		}
		return
	}
	for n := range r.res {
		delete(st.rejected, n)
	}
	st.version, st.uncertain = r.version, false
	req.VersionInfo = r.version
	for n := range r.res {
		st.viewAt[n] = c.hist.epochOf[r.snap]
	}
	if partial(cache.GetResponseType(r.typeURL)) {
		maps.Copy(st.view, r.res)
	} else {
		st.view = maps.Clone(r.res)
		st.viewEpoch = c.hist.epochOf[r.snap]
	}
	for dep, ref := range propReferrer {
		if ref == r.typeURL || dep == r.typeURL {
			c.prune(dep)
		}
	}
	c.queue = append(c.queue, req)
}

// prune drops, for a wildcard client, the load assignments (route
// configurations, dep) of the clusters (listeners) that went, as Envoy
// does: those its clusters (listeners) do not refer to, and that came
// from an older snapshot than they did.
func (c *modelClient) prune(dep string) {
	ref := c.types[propReferrer[dep]]
	if c.kind != wildcardClient || ref.viewEpoch == 0 {
		return
	}
	now, d := c.refs(dep), c.types[dep]
	maps.DeleteFunc(d.view, func(n string, _ []byte) bool {
		drop := !slices.Contains(now, n) && d.viewAt[n] < ref.viewEpoch
		if drop {
			d.pruned[n] = true
			if c.resume && d.answers == 0 {
				d.limbo[n] = true // see resume.go: dropped before the resumed stream's first answer
			}
		}
		return drop
	})
}

// checkDelta checks a delta response: everything it carries differs from
// what the client has, it removes only what the client has, and it comes
// only when something differs (or as a wildcard's first answer).
func (c *modelClient) checkDelta(r simResponse, st *typeState, want map[string][]byte, inSync bool) {
	for name, b := range r.res {
		if w, ok := want[name]; !ok || !bytes.Equal(w, b) {
			c.failf("delta %s response carries %s, which is not what the node asked for", TypeName(r.typeURL), name)
		}
		if v, ok := r.believed[name]; inSync && ok && bytes.Equal(v, b) && r.server.versions[name] == r.versions[name] {
			c.failf("delta %s response carries %s, which the client has", TypeName(r.typeURL), name)
		}
	}
	for _, name := range r.removed {
		if _, ok := want[name]; ok {
			c.failf("delta %s response removes %s, which the node asks for", TypeName(r.typeURL), name)
		}
	}
	if len(r.res) == 0 && len(r.removed) == 0 && !st.firstOK {
		c.failf("empty delta %s response", TypeName(r.typeURL))
	}
	st.firstOK = false
}

// applyDelta ACKs or NACKs a delta response.
func (c *modelClient) applyDelta(r simResponse, st *typeState, nack bool) {
	apply := func(m map[string][]byte) {
		maps.Copy(m, r.res)
		for _, n := range r.removed {
			delete(m, n)
		}
	}
	req := &discoverygrpc.DeltaDiscoveryRequest{TypeUrl: r.typeURL, ResponseNonce: r.nonce}
	if nack {
		req.ErrorDetail = &statuspb.Status{Code: 3, Message: "rejected by the model"}
	} else {
		apply(st.view)
		maps.Copy(st.viewVersions, r.versions)
		for _, n := range r.removed {
			delete(st.viewVersions, n)
		}
	}
	c.queue = append(c.queue, req)
}

// expected is what snap holds of typeURL for a client asking for names
// (or everything, for a wildcard): name -> encoded resource.
func (c *modelClient) expected(typeURL string, snap *cache.Snapshot, names []string) map[string][]byte {
	st := c.types[typeURL]
	out := map[string][]byte{}
	for name, r := range snap.GetResourcesAndTTL(typeURL) {
		if st.wildcard || slices.Contains(names, name) {
			out[name] = r.Resource.(*wire).b
		}
	}
	return out
}

// check compares what the client has with what its node's snapshot
// holds for what it asks, once the stream is quiet.
func (c *modelClient) check(snap *cache.Snapshot) {
	// A SotW client whose last response of clusters or listeners was
	// NACKed keeps what it had before, and the server does not send what it
	// rejected again (cache_sotw.go) until they change: resources that left
	// the snapshot may stay, in that type and in those its resources refer to.
	// What its other types then ask for and have follows those it kept, so
	// such a client is not checked against the snapshot.
	for _, t := range propTypes {
		if !c.delta && c.types[t].nacked && !partial(cache.GetResponseType(t)) {
			return
		}
	}
	for _, t := range propTypes {
		st := c.types[t]
		if !st.started {
			if c.kind == envoyClient && len(c.refs(t)) == 0 {
				continue // nothing to ask for
			}
			c.failf("%s never requested", TypeName(t))
			continue
		}
		want := c.expected(t, snap, st.names)
		have := st.view
		if c.delta {
			have = st.believed
		}
		for name, b := range want {
			if !c.delta && (st.rejected[name] || st.limbo[name]) {
				continue // NACKed (the server has no reason to send it again), or resume.go's known limit
			}
			if v, ok := have[name]; !ok {
				c.failf("%s: %s missing (has %v)", TypeName(t), name, slices.Sorted(maps.Keys(have)))
			} else if !bytes.Equal(v, b) {
				c.failf("%s: %s differs from the snapshot", TypeName(t), name)
			}
		}
		for name := range have {
			if _, ok := want[name]; ok {
				continue
			}
			// A named load assignment or route configuration that left the
			// snapshot stays (SotW) until the client stops naming it.
			if !c.delta && partial(cache.GetResponseType(t)) && !st.wildcard && slices.Contains(st.names, name) {
				continue
			}
			// A wildcard client cannot always tell that one left (SotW
			// responses do not remove), but one no cluster (listener) of
			// it refers to is not used.
			if !c.delta && partial(cache.GetResponseType(t)) && st.wildcard && !slices.Contains(c.refs(t), name) {
				continue
			}
			c.failf("%s: has %s, which the snapshot does not hold for it", TypeName(t), name)
		}
	}
}
