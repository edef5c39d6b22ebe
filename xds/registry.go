package xds

import (
	"cmp"
	"container/list"
	"slices"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xds-server/xds-server/internal/logclip"
)

// Node is what the registry knows about one xDS node.
type Node struct {
	ID             string            `json:"id"`
	Cluster        string            `json:"cluster"`
	UserAgent      string            `json:"user_agent,omitempty"`
	Metadata       map[string]any    `json:"metadata,omitempty"`
	Locality       map[string]string `json:"locality,omitempty"`
	Streams        int               `json:"streams"`      // open streams now
	ConnectedAt    time.Time         `json:"connected_at"` // first stream of the current session
	DisconnectedAt time.Time         `json:"disconnected_at,omitzero"`
	LastNACK       *NACK             `json:"last_nack,omitempty"`
	// Group and Index place the node for subsetting: its client index
	// within its group, from IndexSource ("metadata", "local", "consul", or
	// "fallback" when the configured table failed); Index is -1 until set.
	Group       string `json:"subset_group"`
	Index       int    `json:"subset_index"`
	IndexSource string `json:"subset_index_source,omitempty"`
	// Versions holds, per resource type URL, the last version the node
	// acknowledged (filled in by list; nil in get's and all's copies).
	Versions map[string]string `json:"acked_versions,omitempty"`
	// acked is where the node's streams record what they acknowledge.
	acked *ackedVersions
}

// NACK is the last rejection a node sent.
type NACK struct {
	At      time.Time `json:"at"`
	TypeURL string    `json:"type_url"`
	Version string    `json:"rejected_version"`
	Nonce   string    `json:"nonce,omitempty"` // of the rejected response
	Error   string    `json:"error"`           // the node's error_detail, at most maxNACKErrorBytes
}

// maxNACKErrorBytes bounds the error detail kept per node.
const maxNACKErrorBytes = 4 << 10

// registry tracks connected nodes by stream, and disconnected ones
// until they expire or, past the cap on known nodes, are evicted (oldest
// disconnected first). It is safe for concurrent use. What every response
// and request of a bound stream reads (its node, its latest nonces) is
// found without the registry's lock, in one lookup (byStream), so that
// 10,000 streams' responses and ACKs do not queue on one mutex.
type registry struct {
	mu       sync.Mutex
	nodes    map[string]*Node
	streams  map[int64]string // stream id -> node id, once the node is known
	byStream sync.Map         // stream id -> *streamState; its id set under mu
	// max bounds len(nodes); 0 means no bound.
	max int
	// idle holds the ids of disconnected nodes, oldest disconnect first;
	// idleAt is each one's element.
	idle   *list.List
	idleAt map[string]*list.Element
}

func newRegistry(maxNodes int) *registry {
	return &registry{nodes: map[string]*Node{}, streams: map[int64]string{},
		max: maxNodes, idle: list.New(), idleAt: map[string]*list.Element{}}
}

// errTooManyNodes refuses a node when every known node is connected and
// the cap on known nodes is reached.
var errTooManyNodes = status.Error(codes.ResourceExhausted, "xds: too many nodes connected (xds.max_known_nodes); try another replica")

// attach binds a stream to a node on the stream's first request. It
// reports whether the node was not connected before (new, or back after
// all its streams closed), and is a no-op for a stream already bound. A
// new node past the cap on known nodes evicts the node disconnected the
// longest (evicted, a copy; ID "" when none), or is refused with
// errTooManyNodes if none is.
func (r *registry) attach(stream int64, n *core.Node, now time.Time) (id string, fresh bool, evicted Node, err error) {
	if id := r.nodeOf(stream); id != "" {
		return id, false, Node{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.streams[stream]; ok {
		return id, false, Node{}, nil
	}
	if n == nil {
		return "", false, Node{}, nil
	}
	id = n.GetId()
	node, ok := r.nodes[id]
	if !ok {
		if r.max > 0 && len(r.nodes) >= r.max {
			oldest := r.idle.Front()
			if oldest == nil {
				return "", false, Node{}, errTooManyNodes
			}
			evicted = *r.nodes[oldest.Value.(string)]
			r.forgetLocked(evicted.ID)
		}
		node = &Node{ID: id, Index: -1, acked: &ackedVersions{m: map[string]string{}}}
		r.nodes[id] = node
	}
	r.streams[stream] = id
	st := r.stream(stream)
	st.mu.Lock()
	st.id, st.acked = id, node.acked
	st.mu.Unlock()
	fresh = node.Streams == 0
	if fresh {
		node.ConnectedAt, node.DisconnectedAt = now, time.Time{}
		r.busy(id)
	}
	node.Streams++
	node.Cluster = n.GetCluster()
	node.UserAgent = strings.TrimSpace(n.GetUserAgentName() + " " + n.GetUserAgentVersion())
	if md := n.GetMetadata(); md != nil {
		node.Metadata = md.AsMap()
	}
	if l := n.GetLocality(); l != nil {
		node.Locality = map[string]string{"region": l.GetRegion(), "zone": l.GetZone(), "sub_zone": l.GetSubZone()}
	}
	return id, fresh, evicted, nil
}

// detach unbinds a stream; it reports the node id and whether that was the
// node's last stream.
func (r *registry) detach(stream int64, now time.Time) (id string, last bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byStream.Delete(stream)
	id, ok := r.streams[stream]
	if !ok {
		return "", false
	}
	delete(r.streams, stream)
	node := r.nodes[id]
	node.Streams--
	if node.Streams == 0 {
		node.DisconnectedAt = now
		r.idleAt[id] = r.idle.PushBack(id)
		return id, true
	}
	return id, false
}

// busy takes a node off the idle list. Under r.mu.
func (r *registry) busy(id string) {
	if e, ok := r.idleAt[id]; ok {
		r.idle.Remove(e)
		delete(r.idleAt, id)
	}
}

// forgetLocked drops a node. Under r.mu.
func (r *registry) forgetLocked(id string) {
	r.busy(id)
	delete(r.nodes, id)
}

// size counts known nodes.
func (r *registry) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.nodes)
}

// setIndex records a node's subsetting group and client index.
func (r *registry) setIndex(id, group string, index int, source string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if node, ok := r.nodes[id]; ok {
		node.Group, node.Index, node.IndexSource = group, index, source
	}
}

// nodeOf returns the node id bound to a stream.
func (r *registry) nodeOf(stream int64) string {
	v, ok := r.byStream.Load(stream)
	if !ok {
		return ""
	}
	st := v.(*streamState)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.id
}

// nack records a node's NACK, its error detail clipped.
func (r *registry) nack(id string, n NACK) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if node, ok := r.nodes[id]; ok {
		n.Error = logclip.To(n.Error, maxNACKErrorBytes)
		node.LastNACK = &n
	}
}

// sentNonce is the latest response of one type on a stream.
type sentNonce struct {
	nonce  string
	nacked bool // a NACK of it was processed
}

// streamState is what a stream's responses and requests read: its node
// and the latest response of each type on it.
type streamState struct {
	mu     sync.Mutex
	id     string               // its node; "" until bound
	acked  *ackedVersions       // its node's; nil until bound
	byType map[string]sentNonce // type URL -> its latest response
}

// stream returns the state of a stream, made on first use.
func (r *registry) stream(stream int64) *streamState {
	v, ok := r.byStream.Load(stream)
	if !ok {
		v, _ = r.byStream.LoadOrStore(stream, &streamState{byType: map[string]sentNonce{}})
	}
	return v.(*streamState)
}

// responded records the nonce of a response about to be sent on a stream
// and returns the stream's node id ("" if unbound).
func (r *registry) responded(stream int64, typeURL, nonce string) string {
	st := r.stream(stream)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.byType[typeURL] = sentNonce{nonce: nonce}
	return st.id
}

// freshNACK reports whether a NACK on a stream is to be processed: it names
// the latest response of its type sent there, which was not NACKed
// before. It marks that response NACKed.
func (r *registry) freshNACK(stream int64, typeURL, nonce string) bool {
	v, ok := r.byStream.Load(stream)
	if !ok {
		return false
	}
	st := v.(*streamState)
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.byType[typeURL]
	if !ok || s.nonce != nonce || s.nacked {
		return false
	}
	s.nacked = true
	st.byType[typeURL] = s
	return true
}

// refuse unbinds a stream whose node was refused at its first request;
// a node that had no index yet (it was never admitted) is forgotten.
func (r *registry) refuse(stream int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byStream.Delete(stream)
	id, ok := r.streams[stream]
	if !ok {
		return
	}
	delete(r.streams, stream)
	node := r.nodes[id]
	if node.Streams--; node.Streams > 0 {
		return
	}
	node.DisconnectedAt = now
	if node.Index < 0 {
		delete(r.nodes, id)
		return
	}
	r.idleAt[id] = r.idle.PushBack(id)
}

// expire forgets nodes disconnected for longer than grace and returns their ids.
func (r *registry) expire(now time.Time, grace time.Duration) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []string
	for id, n := range r.nodes {
		if n.Streams == 0 && now.Sub(n.DisconnectedAt) > grace {
			gone = append(gone, id)
			r.forgetLocked(id)
		}
	}
	slices.Sort(gone)
	return gone
}

// connected counts nodes with at least one open stream.
func (r *registry) connected() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := 0
	for _, n := range r.nodes {
		if n.Streams > 0 {
			c++
		}
	}
	return c
}

// list returns copies of all known nodes, sorted by id.
func (r *registry) list() []Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Node, 0, len(r.nodes))
	for _, n := range r.nodes {
		out = append(out, copyNode(n))
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// copyNode copies n and its versions.
func copyNode(n *Node) Node {
	c := *n
	c.Versions = n.acked.clone()
	return c
}

// get returns a copy of one node.
func (r *registry) get(id string) (Node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.nodes[id]
	if !ok {
		return Node{}, false
	}
	return *n, true
}

// all returns copies of all known nodes sorted by id, as get does
// (without their acknowledged versions), under two locks rather than one per node: a
// reconcile pass reads the whole fleet while 10,000 streams' responses
// and ACKs take the lock.
func (r *registry) all() []Node {
	ids := r.ids()
	out := make([]Node, 0, len(ids))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if n, ok := r.nodes[id]; ok { // else gone since
			out = append(out, *n)
		}
	}
	return out
}

// ids returns the ids of all known nodes (connected or within grace).
func (r *registry) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.nodes))
	for id := range r.nodes {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
