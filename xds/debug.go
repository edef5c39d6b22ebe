package xds

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xds-server/xds-server/internal/httpjson"
	"github.com/xds-server/xds-server/xdscache"
)

// Nodes returns every known node (connected, or gone within the grace
// period), sorted by id.
func (s *Server) Nodes() []Node { return s.reg.list() }

// NodeConfig is what a node was last sent, per resource type.
type NodeConfig struct {
	Node      Node                  `json:"node"`
	Resources map[string]TypeConfig `json:"resources"` // by short type name
	// Localities are the node's place and priority levels, when services
	// have a locality policy.
	Localities *NodeLevels `json:"localities,omitempty"`
}

// TypeConfig is one resource type of a node's config.
type TypeConfig struct {
	// Version is the version_info of state-of-the-world responses.
	Version string `json:"version"`
	// Versions are each resource's own version by name: its content hash,
	// the version delta responses carry.
	Versions  map[string]string `json:"versions"`
	Resources []json.RawMessage `json:"resources"` // protojson, sorted by name
}

// Config returns what node id was last sent, or false if it is unknown.
func (s *Server) Config(id string) (NodeConfig, bool, error) {
	node, ok := s.reg.get(id)
	if !ok {
		return NodeConfig{}, false, nil
	}
	out := NodeConfig{Node: node, Resources: map[string]TypeConfig{}}
	snap, ok := s.rec.snapshotOf(id)
	if !ok {
		return out, true, nil
	}
	out.Localities = s.nodeLevels(node, snap)
	for _, kind := range xdscache.Kinds {
		url, _ := cache.GetResponseTypeURL(kind)
		res := snap.Resources[kind]
		names := make([]string, 0, len(res.Items))
		for n := range res.Items {
			names = append(names, n)
		}
		slices.Sort(names)
		tc := TypeConfig{Version: res.Version, Versions: make(map[string]string, len(names)), Resources: make([]json.RawMessage, 0, len(names))}
		for _, n := range names {
			m, err := xdscache.Decode(res.Items[n].Resource)
			if err != nil {
				return NodeConfig{}, true, err
			}
			b, err := protojson.Marshal(m)
			if err != nil {
				return NodeConfig{}, true, err
			}
			tc.Resources = append(tc.Resources, b)
			tc.Versions[n] = snap.VersionMap[url][n]
		}
		out.Resources[xdscache.TypeName(url)] = tc
	}
	return out, true, nil
}

// Handler serves /debug/nodes[?after=ID&limit=N], /debug/config?node=ID and
// /debug/subsets?service=S[&limit=N|&node=ID] as JSON.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/nodes", s.serveNodes) // debug_nodes.go: paged
	mux.HandleFunc("GET /debug/config", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("node")
		if id == "" {
			httpjson.Write(w, http.StatusBadRequest, map[string]string{"error": "missing query parameter: node"})
			return
		}
		cfg, ok, err := s.Config(id)
		switch {
		case err != nil:
			httpjson.Write(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		case !ok:
			httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "unknown node: " + id})
		default:
			httpjson.Write(w, http.StatusOK, cfg)
		}
	})
	mux.HandleFunc("GET /debug/changes", s.servePasses) // stages.go: the latest reconcile passes
	mux.HandleFunc("GET /debug/subsets", func(w http.ResponseWriter, r *http.Request) {
		svc := r.URL.Query().Get("service")
		if svc == "" {
			httpjson.Write(w, http.StatusBadRequest, map[string]string{"error": "missing query parameter: service"})
			return
		}
		q, err := subsetQuery(r.URL.Query())
		if err != nil {
			httpjson.Write(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		rep, ok := s.Subsets(svc, q)
		switch {
		case !ok:
			httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "unknown service: " + svc})
		case q.Node != "" && len(rep.Nodes) == 0:
			httpjson.Write(w, http.StatusNotFound, map[string]string{"error": "unknown node: " + q.Node})
		default:
			httpjson.Write(w, http.StatusOK, rep)
		}
	})
	return mux
}

// subsetQuery reads /debug/subsets' node= and limit= (a count of nodes,
// DefaultReportNodes when absent, at most MaxReportNodes).
func subsetQuery(v url.Values) (SubsetQuery, error) {
	q := SubsetQuery{Node: v.Get("node"), Limit: DefaultReportNodes}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return SubsetQuery{}, fmt.Errorf("limit %q: want a count of nodes, at most %d", l, MaxReportNodes)
		}
		q.Limit = min(n, MaxReportNodes)
	}
	return q, nil
}
