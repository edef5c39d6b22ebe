package drain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/xds-server/xds-server/internal/httpjson"
)

// maxBody bounds a drain request body.
const maxBody = 64 << 10

// request is the body of POST and DELETE /v1/drain.
type request struct {
	Target
	// TTL is a Go duration ("10m") or a number of seconds in [MinTTL,
	// MaxTTL]; absent or null means until deleted. 0, "0s" and anything
	// under MinTTL ("1ns") are refused (400). POST only.
	TTL json.RawMessage `json:"ttl,omitempty"`
}

// Handler serves the admin drain API:
//
//	POST   /v1/drain {"service": S, "endpoint": E, "ttl": "10m"}  drain (idempotent; renews the TTL)
//	POST   /v1/drain {"service": S} or {"node": N}                a whole service, or a Consul node
//	DELETE /v1/drain (the same body, or ?service=S&endpoint=E&node=N)  undrain (idempotent)
//	GET    /v1/drain                                              admin drains and every draining endpoint
//
// Answers are JSON; errors are {"error": "..."} with 400 (bad input), 404
// (unknown service, endpoint or node), 405, or 503 (the drain store, Consul
// KV with HA, could not record the change: nothing changed).
func (s *Manager) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			httpjson.Write(w, http.StatusOK, s.State())
		case http.MethodPost:
			s.post(w, r)
		case http.MethodDelete:
			s.delete(w, r)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			httpjson.Write(w, http.StatusMethodNotAllowed, map[string]string{"error": "method " + r.Method + " not allowed; use GET, POST or DELETE"})
		}
	})
}

func (s *Manager) post(w http.ResponseWriter, r *http.Request) {
	req, err := decodeRequest(r.Body)
	if err != nil {
		writeError(w, err)
		return
	}
	ttl, err := parseTTL(req.TTL)
	if err != nil {
		writeError(w, err)
		return
	}
	a, err := s.Set(req.Target, ttl)
	if err != nil {
		writeError(w, err)
		return
	}
	s.logDrain(r, a)
	httpjson.Write(w, http.StatusOK, map[string]any{"drain": a})
}

func (s *Manager) delete(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t := Target{Service: q.Get("service"), Endpoint: q.Get("endpoint"), Node: q.Get("node")}
	if t == (Target{}) {
		req, err := decodeRequest(r.Body)
		if err != nil {
			writeError(w, err)
			return
		}
		if len(req.TTL) > 0 {
			writeError(w, fmt.Errorf("%w: ttl has no meaning in DELETE", ErrInvalid))
			return
		}
		t = req.Target
	}
	deleted, err := s.Delete(t)
	if err != nil {
		writeError(w, err)
		return
	}
	s.logUndrain(r, t, deleted)
	httpjson.Write(w, http.StatusOK, map[string]any{"deleted": deleted, "target": t})
}

// decodeRequest reads one strict JSON drain request.
func decodeRequest(body io.Reader) (request, error) {
	dec := json.NewDecoder(io.LimitReader(body, maxBody+1))
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: body: %w", ErrInvalid, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: body: more than one JSON value", ErrInvalid)
	}
	return req, nil
}

// MinTTL is the shortest TTL the drain API takes: a drain that would end
// before it reached the nodes is a mistake, and a zero TTL is not a way
// to say "no expiry" (omit the ttl for that).
const MinTTL = time.Second

// parseTTL reads a TTL: a Go duration string or a number of seconds, in
// [MinTTL, MaxTTL]; absent or null is 0 (until deleted).
func parseTTL(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var d time.Duration
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		if d, err = time.ParseDuration(strings.TrimSpace(str)); err != nil {
			return 0, fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
		}
	} else {
		secs, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || secs != secs || secs < 0 || secs > MaxTTL.Seconds() {
			return 0, fmt.Errorf("%w: ttl %s is neither a duration like \"10m\" nor seconds in [%v, %v]", ErrInvalid, raw, MinTTL.Seconds(), MaxTTL.Seconds())
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < MinTTL || d > MaxTTL {
		return 0, fmt.Errorf("%w: ttl %s is not in [%v, %v]; omit ttl for a drain until deleted", ErrInvalid, raw, MinTTL, MaxTTL)
	}
	return d, nil
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	switch {
	case errors.Is(err, ErrUnknownTarget):
		code = http.StatusNotFound
	case errors.Is(err, ErrUnavailable):
		code = http.StatusServiceUnavailable
	}
	httpjson.Write(w, code, map[string]string{"error": err.Error()})
}
