package ha

import (
	"net/http"
	"time"

	"github.com/xds-server/xds-server/internal/httpjson"
)

// Summaries is what the weights part shows on /debug/ha: the last load
// summary this replica published and those it merged.
type Summaries struct {
	Published      time.Time        `json:"published,omitzero"`       // this replica's last summary write
	PublishedBytes int              `json:"published_bytes,omitzero"` // its size
	Merged         []ReplicaSummary `json:"merged"`                   // the summaries seen, one per replica
}

// ReplicaSummary is one replica's summary as seen here.
type ReplicaSummary struct {
	Replica    string    `json:"replica"`
	Updated    time.Time `json:"updated"`         // when that replica published it
	Bytes      int       `json:"bytes,omitzero"`  // its size
	AgeSeconds float64   `json:"age_seconds"`     // filled in by the page
	Detail     any       `json:"detail,omitzero"` // anything else the weights part shows
}

// DebugConfig is what /debug/ha shows; every provider is optional.
type DebugConfig struct {
	Replica   string            // this replica's id
	Prefix    string            // ha.consul.prefix
	Leader    func() string     // the weights leader's replica id ("" unknown); nil: ""
	Summaries func() Summaries  // nil: none
	Drains    func() SeenDrains // nil: none
	Now       func() time.Time  // nil: time.Now
}

// DebugPage is the JSON of /debug/ha.
type DebugPage struct {
	Replica   string     `json:"replica"`
	Prefix    string     `json:"prefix"`
	Leader    string     `json:"leader"`
	IsLeader  bool       `json:"is_leader"`
	Summaries Summaries  `json:"summaries"`
	Drains    SeenDrains `json:"drains"`
}

// Page builds the page at the current time.
func (c DebugConfig) Page() DebugPage {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	p := DebugPage{Replica: c.Replica, Prefix: c.Prefix, Summaries: Summaries{Merged: []ReplicaSummary{}}}
	if c.Leader != nil {
		p.Leader = c.Leader()
		p.IsLeader = p.Leader != "" && p.Leader == c.Replica
	}
	if c.Summaries != nil {
		p.Summaries = c.Summaries()
		if p.Summaries.Merged == nil {
			p.Summaries.Merged = []ReplicaSummary{}
		}
		t := now()
		for i := range p.Summaries.Merged {
			s := &p.Summaries.Merged[i]
			s.AgeSeconds = max(t.Sub(s.Updated).Seconds(), 0)
		}
	}
	if c.Drains != nil {
		p.Drains = c.Drains()
	}
	return p
}

// Handler serves /debug/ha (GET, JSON).
func (c DebugConfig) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Write(w, http.StatusOK, c.Page())
	})
}
