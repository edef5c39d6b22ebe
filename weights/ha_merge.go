package weights

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Merger feeds replicas' summaries into one tracker (the merged view every
// replica keeps and the weights leader solves from): a backend load
// becomes a backend report, a group's load to an endpoint a client report
// from the pseudo node "~<replica>/<hash of the subset>". A load is fed
// only when it is newer than what the same replica said last time, so
// republishing an unchanged summary does not step the smoothing. Not safe
// for concurrent use; no I/O, no clock.
type Merger struct {
	fed map[string]int64 // load key -> At last fed (unix ms)
}

// NewMerger returns an empty Merger.
func NewMerger() *Merger { return &Merger{fed: map[string]int64{}} }

// Merged is what Feed learned besides the reports: per service, the
// pseudo nodes' subsets (node -> endpoint ids), the balancer's input, and
// how many loads the tracker rejected (unknown endpoints).
type Merged struct {
	Subsets  map[string]map[string][]string
	Rejected int
}

// Feed observes, in t at now, every load of sums newer than the last fed
// from the same replica.
func (m *Merger) Feed(t *Tracker, sums []Summary, now time.Time) Merged {
	out := Merged{Subsets: map[string]map[string][]string{}}
	seen := make(map[string]int64, len(m.fed))
	observe := func(key string, r Report) {
		at := r.At.UnixMilli()
		seen[key] = max(at, m.fed[key])
		if at <= m.fed[key] {
			return
		}
		if t.Observe(r, now) != nil { // unknown endpoint (discovery differs) or invalid
			out.Rejected++
		}
	}
	for _, s := range sums {
		for _, ss := range s.Services {
			m.feedService(s.Replica, s.At, ss, observe, &out)
		}
	}
	m.fed = seen
	return out
}

func (m *Merger) feedService(replica string, at int64, ss ServiceSummary, observe func(string, Report), out *Merged) {
	id := func(i int) (string, bool) {
		if i < 0 || i >= len(ss.Endpoints) {
			return "", false
		}
		return ss.Endpoints[i], true
	}
	prefix := replica + "\x00" + ss.Name + "\x00"
	for _, b := range ss.Backend {
		if ep, ok := id(b.E); ok {
			observe(prefix+ep, Report{Service: ss.Name, Endpoint: ep, At: time.UnixMilli(at - b.Age),
				QPS: b.QPS, EPS: b.EPS, CPU: b.CPU, App: b.App})
		}
	}
	for _, g := range ss.Groups {
		members := make([]string, 0, len(g.Members))
		for _, i := range g.Members {
			if ep, ok := id(i); ok {
				members = append(members, ep)
			}
		}
		node := pseudoNode(replica, members)
		if out.Subsets[ss.Name] == nil {
			out.Subsets[ss.Name] = map[string][]string{}
		}
		out.Subsets[ss.Name][node] = members
		for _, l := range g.Loads {
			if ep, ok := id(l.E); ok {
				observe(prefix+node+"\x00"+ep, Report{Service: ss.Name, Endpoint: ep, Node: node,
					At: time.UnixMilli(at - l.Age), QPS: l.QPS, EPS: l.EPS, CPU: l.Util})
			}
		}
	}
}

// pseudoNode names a replica's group of nodes with one subset.
func pseudoNode(replica string, members []string) string {
	h := fnv.New64a()
	for _, m := range members {
		_, _ = h.Write([]byte(m))
		_, _ = h.Write([]byte{0})
	}
	return "~" + replica + "/" + strconv.FormatUint(h.Sum64(), 36)
}
