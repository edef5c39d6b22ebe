package xds

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/xds-server/xds-server/internal/httpjson"
)

// DefaultNodesPage and MaxNodesPage bound a page of /debug/nodes: the
// nodes it lists when limit= is absent and the most a query gets. 200,000
// known nodes made one unpaged answer 66 MB.
const (
	DefaultNodesPage = 100
	MaxNodesPage     = 1000
)

// NodesPage is a page of the known nodes, sorted by id.
type NodesPage struct {
	Nodes []Node `json:"nodes"`
	Total int    `json:"total"` // known nodes, on every page
	// Next is the after= of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

// NodesAfter returns at most limit known nodes whose ids sort after
// after ("" starts at the first), sorted by id.
func (s *Server) NodesAfter(after string, limit int) NodesPage { return s.reg.page(after, limit) }

// page is NodesAfter.
func (r *registry) page(after string, limit int) NodesPage {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, min(len(r.nodes), 4*limit))
	for id := range r.nodes {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := NodesPage{Total: len(r.nodes)}
	if len(ids) > limit {
		ids = ids[:limit]
		out.Next = ids[limit-1]
	}
	out.Nodes = make([]Node, 0, len(ids))
	for _, id := range ids {
		out.Nodes = append(out.Nodes, copyNode(r.nodes[id]))
	}
	return out
}

// nodesQuery reads /debug/nodes' after= and limit= (DefaultNodesPage
// when absent, at most MaxNodesPage).
func nodesQuery(v url.Values) (after string, limit int, err error) {
	limit = DefaultNodesPage
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("limit %q: want a count of nodes in [1, %d]", l, MaxNodesPage)
		}
		limit = min(n, MaxNodesPage)
	}
	return v.Get("after"), limit, nil
}

// serveNodes serves GET /debug/nodes[?after=ID][&limit=N].
func (s *Server) serveNodes(w http.ResponseWriter, r *http.Request) {
	after, limit, err := nodesQuery(r.URL.Query())
	if err != nil {
		httpjson.Write(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	httpjson.Write(w, http.StatusOK, s.NodesAfter(after, limit))
}
