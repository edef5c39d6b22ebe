package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/internal/httpjson"
	"github.com/xds-server/xds-server/ratelimit"
	"github.com/xds-server/xds-server/xds"
)

// DrainsView is /ui/api/drains: the drain API's state.
type DrainsView struct {
	Enabled bool `json:"enabled"` // the drain API is wired
	drain.State
}

// RateLimitView is /ui/api/ratelimit: the rules and the statistics per
// domain.
type RateLimitView struct {
	Domains []DomainView `json:"domains"`
}

// DomainView is one domain: its rules and, once decided, its statistics.
type DomainView struct {
	DomainStats
	Rules []RuleView `json:"rules"`
}

// RuleView is one configured rule.
type RuleView struct {
	Key       string `json:"key"`
	Name      string `json:"name,omitempty"`
	Limit     string `json:"limit"`
	Unlimited bool   `json:"unlimited,omitempty"`
	Shadow    bool   `json:"shadow_mode,omitempty"`
}

func (c *Console) drains() DrainsView {
	if c.cfg.Drains == nil {
		return DrainsView{State: drain.State{Admin: []drain.Admin{}, Draining: []drain.Draining{}}}
	}
	st := c.cfg.Drains.State()
	if st.Admin == nil {
		st.Admin = []drain.Admin{}
	}
	return DrainsView{Enabled: true, State: st}
}

func (c *Console) rateLimits() RateLimitView {
	byName := map[string]*DomainView{}
	var order []string
	get := func(name string) *DomainView {
		if byName[name] == nil {
			byName[name] = &DomainView{DomainStats: emptyStats(name), Rules: []RuleView{}}
			order = append(order, name)
		}
		return byName[name]
	}
	if c.cfg.Rules != nil {
		cfg := c.cfg.Rules.Config()
		for _, d := range cfg.Domains() {
			get(d)
		}
		for _, r := range cfg.Rules() {
			dv := get(r.Domain)
			dv.Rules = append(dv.Rules, ruleView(r))
		}
	}
	for _, ds := range c.stats.Domains() {
		get(ds.Domain).DomainStats = ds
	}
	out := RateLimitView{Domains: make([]DomainView, 0, len(order))}
	slices.Sort(order)
	for _, n := range order {
		out.Domains = append(out.Domains, *byName[n])
	}
	return out
}

func emptyStats(name string) DomainStats {
	ds := DomainStats{Domain: name, Nearest: []KeyStat{}, Criticality: []ClassStat{}}
	for c := range numClasses {
		ds.Criticality = append(ds.Criticality, ClassStat{Class: ratelimit.Criticality(c).String(), Accepted: 1})
	}
	return ds
}

func ruleView(r *ratelimit.Rule) RuleView {
	v := RuleView{Key: r.Key, Name: r.Name, Unlimited: r.Unlimited, Shadow: r.ShadowMode}
	if r.Unlimited {
		v.Limit = "unlimited"
	} else {
		v.Limit = r.Limit.String()
	}
	return v
}

// api adds the JSON endpoints to mux.
func (c *Console) api(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/api/fleet", func(w http.ResponseWriter, _ *http.Request) {
		c.writeJSON(w, http.StatusOK, c.fleet())
	})
	mux.HandleFunc("GET /ui/api/services/{name}", func(w http.ResponseWriter, r *http.Request) {
		name, node := r.PathValue("name"), r.URL.Query().Get("node")
		if err := checkInput(name, node); err != nil {
			c.writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		v, ok := c.service(name, node)
		if !ok {
			c.writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown service: " + name})
			return
		}
		if b, _ := strconv.ParseBool(r.URL.Query().Get("history")); b {
			if h, ok := c.history.of(name, c.cfg.HistoryInterval); ok {
				v.History = &h
			}
		}
		c.writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /ui/api/history/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := checkInput(name, ""); err != nil {
			c.writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		h, ok := c.history.of(name, c.cfg.HistoryInterval)
		if !ok {
			c.writeJSON(w, http.StatusNotFound, map[string]string{"error": "no history for service: " + name})
			return
		}
		c.writeJSON(w, http.StatusOK, h)
	})
	mux.HandleFunc("GET /ui/api/drains", func(w http.ResponseWriter, _ *http.Request) {
		c.writeJSON(w, http.StatusOK, c.drains())
	})
	mux.HandleFunc("GET /ui/api/ratelimit", func(w http.ResponseWriter, _ *http.Request) {
		c.writeJSON(w, http.StatusOK, c.rateLimits())
	})
}

func (c *Console) writeJSON(w http.ResponseWriter, code int, v any) {
	kind := "api"
	if code >= 400 {
		kind = "error"
	}
	c.m.requests.WithLabelValues(kind).Inc()
	w.Header().Set("Cache-Control", "no-store")
	httpjson.WriteCompact(w, code, v)
}

// Bounds of what a request names: a service name of at most
// MaxServiceNameBytes, a node id of at most xds.MaxNodeIDBytes (what the
// xDS server accepts of a node); longer ones are refused with 400 before
// any lookup, and never echoed.
const MaxServiceNameBytes = 512

// checkInput reports a service name or node id over its bound.
func checkInput(service, node string) error {
	if len(service) > MaxServiceNameBytes {
		return fmt.Errorf("console: service name of %d bytes, more than %d", len(service), MaxServiceNameBytes)
	}
	if len(node) > xds.MaxNodeIDBytes {
		return fmt.Errorf("console: node id of %d bytes, more than %d", len(node), xds.MaxNodeIDBytes)
	}
	return nil
}
