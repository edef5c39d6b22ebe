package xdscache

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// The server end of a node's stream for the property test
// (cache_property_test.go; the client end is cache_model_test.go):
// sotwSim and deltaSim do what go-control-plane v0.14's stream servers do
// with a stream's requests and responses (pkg/server/sotw/v3 process,
// pkg/server/delta/v3 processDelta) with the real subscription type
// (pkg/server/stream/v3): a response waits in its watch's channel until
// the test sends it, and a SotW request for a type abandons the response
// of the type not sent yet, as the server's new watch does.

// simResponse is a response as the client reads it.
type simResponse struct {
	made
	typeURL, version, nonce string
	res                     map[string][]byte // name -> encoded resource
	order                   []string          // names in the response's order
	removed                 []string          // delta
	versions                map[string]string // delta: name -> version
}

// made is what the test knows of how a response was made.
type made struct {
	snap     *cache.Snapshot // the node's snapshot
	names    []string        // the names its watch subscribed to, sorted
	wantFull bool            // SotW: it must carry every requested resource (the answer to a NACK or a first request)
	server                   // what the server took the client to have of the type then
}

// server is what the model takes the server to know of what a stream
// has of a type (its subscription state): updated when the server sends
// a response or reads a request, not when the client reads.
type server struct {
	known    map[string]bool   // SotW: names the stream has (sent on it, or resumed)
	believed map[string][]byte // delta: what the stream has, by name
	versions map[string]string // delta: their versions
}

func (s server) clone() server {
	return server{known: maps.Clone(s.known), believed: maps.Clone(s.believed), versions: maps.Clone(s.versions)}
}

// madeFor tags a response of a watch whose request is req and
// subscription sub, made when the node's snapshot is snap.
func madeFor(snap *cache.Snapshot, req *discoverygrpc.DiscoveryRequest, sub stream.Subscription) made {
	m := made{snap: snap, names: slices.Sorted(maps.Keys(sub.SubscribedResources()))}
	if req != nil && snap != nil {
		// go-control-plane's answers, which the cache keeps: to a NACK
		// whose version is not the snapshot's, and to a new stream's first
		// request of a node with nothing (a resuming one may be taken to
		// have the snapshot's, see resume.go)
		v := req.GetVersionInfo()
		m.wantFull = v != snap.GetVersion(req.GetTypeUrl()) && req.GetErrorDetail() != nil ||
			v == "" && req.GetResponseNonce() == ""
	}
	return m
}

// sotwSim is go-control-plane's SotW stream server for one stream.
type sotwSim struct {
	c       *Cache
	node    *core.Node
	watches map[string]*sotwSimWatch
	nonce   int
}

type sotwSimWatch struct {
	req    *discoverygrpc.DiscoveryRequest
	sub    stream.Subscription
	nonce  string // of the last response sent on this watch
	cancel func()
	out    chan cache.Response
	made   *made // how its response was made
}

// tag records how the responses made since the last tag were made (the
// test calls it after each request and each snapshot it sets).
func (s *sotwSim) tag(snap *cache.Snapshot, knows func(typeURL string) server) {
	for t, w := range s.watches {
		if len(w.out) > 0 && w.made == nil {
			m := madeFor(snap, w.req, w.sub)
			m.server = knows(t)
			w.made = &m
		}
	}
}

func newSotwSim(c *Cache, node *core.Node) *sotwSim {
	return &sotwSim{c: c, node: node, watches: map[string]*sotwSimWatch{}}
}

// request handles a request as the server's process loop does; false if
// it ignored it (a stale nonce).
func (s *sotwSim) request(req *discoverygrpc.DiscoveryRequest) (bool, error) {
	req.Node = s.node
	typeURL := req.GetTypeUrl()
	var sub stream.Subscription
	if w, ok := s.watches[typeURL]; ok {
		if w.nonce != "" && req.GetResponseNonce() != w.nonce {
			return false, nil // stale nonce: ignored
		}
		w.cancel()
		sub = w.sub
		sub.SetResourceSubscription(req.GetResourceNames())
	} else {
		sub = stream.NewSotwSubscription(req.GetResourceNames(), true)
	}
	out := make(chan cache.Response, 1)
	cancel, err := s.c.CreateWatch(req, sub, out)
	if err != nil {
		return false, err
	}
	s.watches[typeURL] = &sotwSimWatch{req: req, sub: sub, cancel: cancel, out: out}
	return true, nil
}

// pending lists the types with a response waiting, in ADS order.
func (s *sotwSim) pending() []string {
	var out []string
	for _, t := range propTypes {
		if w, ok := s.watches[t]; ok && len(w.out) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// send sends the waiting response of typeURL as the server's send does.
func (s *sotwSim) send(typeURL string) (simResponse, error) {
	w := s.watches[typeURL]
	resp := <-w.out
	out, err := resp.GetDiscoveryResponse()
	if err != nil {
		return simResponse{}, err
	}
	s.nonce++
	out.Nonce = strconv.Itoa(s.nonce)
	w.sub.SetReturnedResources(resp.GetReturnedResources())
	w.nonce = out.Nonce
	r := simResponse{made: *w.made, typeURL: out.GetTypeUrl(), version: out.GetVersionInfo(), nonce: out.GetNonce(), res: map[string][]byte{}}
	for _, a := range out.GetResources() {
		name, err := anyName(a)
		if err != nil {
			return r, err
		}
		if _, dup := r.res[name]; dup {
			return r, fmt.Errorf("%s response carries %s twice", TypeName(typeURL), name)
		}
		r.res[name] = a.GetValue()
		r.order = append(r.order, name)
	}
	return r, nil
}

func (s *sotwSim) close() {
	for _, w := range s.watches {
		w.cancel()
	}
}

// deltaSim is go-control-plane's delta stream server for one stream.
type deltaSim struct {
	c       *Cache
	node    *core.Node
	watches map[string]*deltaSimWatch
	muxed   chan cache.DeltaResponse
	waiting []taggedDelta // responses taken from muxed, in order, not sent yet
	nonce   int
}

type taggedDelta struct {
	resp cache.DeltaResponse
	made made
}

// tag is sotwSim.tag: it moves what the cache put in the multiplexed
// channel to waiting, in order.
func (s *deltaSim) tag(snap *cache.Snapshot, knows func(typeURL string) server) {
	for len(s.muxed) > 0 {
		r := <-s.muxed
		t := r.GetDeltaRequest().GetTypeUrl()
		m := madeFor(snap, nil, s.watches[t].sub)
		m.server = knows(t)
		s.waiting = append(s.waiting, taggedDelta{resp: r, made: m})
	}
}

type deltaSimWatch struct {
	sub    stream.Subscription
	nonce  string
	cancel func()
}

func newDeltaSim(c *Cache, node *core.Node) *deltaSim {
	return &deltaSim{c: c, node: node, watches: map[string]*deltaSimWatch{},
		muxed: make(chan cache.DeltaResponse, 2*int(types.UnknownType))}
}

// request handles a request as processDelta does, once the responses
// waiting before it were sent (processAll: the caller sends them first).
func (s *deltaSim) request(req *discoverygrpc.DeltaDiscoveryRequest) error {
	req.Node = s.node
	typeURL := req.GetTypeUrl()
	w, ok := s.watches[typeURL]
	if !ok {
		w = &deltaSimWatch{sub: stream.NewDeltaSubscription(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe(),
			req.GetInitialResourceVersions(), true)}
		s.watches[typeURL] = w
	} else {
		if w.cancel != nil {
			w.cancel()
		}
		w.sub.UpdateResourceSubscriptions(req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe())
	}
	cancel, err := s.c.CreateDeltaWatch(req, w.sub, s.muxed)
	w.cancel = cancel
	return err
}

func (s *deltaSim) pending() int { return len(s.waiting) }

// send sends the first waiting response.
func (s *deltaSim) send() (simResponse, error) {
	resp, made := s.waiting[0].resp, s.waiting[0].made
	s.waiting = s.waiting[1:]
	out, err := resp.GetDeltaDiscoveryResponse()
	if err != nil {
		return simResponse{}, err
	}
	s.nonce++
	out.Nonce = strconv.Itoa(s.nonce)
	w := s.watches[out.GetTypeUrl()]
	w.nonce = out.Nonce
	w.sub.SetReturnedResources(resp.GetReturnedResources())
	r := simResponse{made: made, typeURL: out.GetTypeUrl(), version: out.GetSystemVersionInfo(), nonce: out.GetNonce(),
		res: map[string][]byte{}, versions: map[string]string{}, removed: out.GetRemovedResources()}
	for _, x := range out.GetResources() {
		name, err := anyName(x.GetResource())
		if err != nil {
			return r, err
		}
		if name != x.GetName() {
			return r, fmt.Errorf("delta resource %q holds %q", x.GetName(), name)
		}
		r.res[name] = x.GetResource().GetValue()
		r.versions[name] = x.GetVersion()
		r.order = append(r.order, name)
	}
	return r, nil
}

func (s *deltaSim) close() {
	for _, w := range s.watches {
		if w.cancel != nil {
			w.cancel()
		}
	}
}

// anyName decodes a resource to read its name.
func anyName(a *anypb.Any) (string, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return "", err
	}
	return cache.GetResourceName(m), nil
}
