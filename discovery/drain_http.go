package discovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDrainBody bounds a drain request body.
const maxDrainBody = 64 << 10

// drainRequest is the body of POST and DELETE /v1/drain.
type drainRequest struct {
	DrainTarget
	// TTL is a Go duration ("10m") or a number of seconds; absent or 0
	// means until deleted. POST only.
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
// (unknown service, endpoint or node) or 405.
func (s *Drains) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			writeDrainJSON(w, http.StatusOK, s.State())
		case http.MethodPost:
			s.post(w, r)
		case http.MethodDelete:
			s.delete(w, r)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			writeDrainJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method " + r.Method + " not allowed; use GET, POST or DELETE"})
		}
	})
}

func (s *Drains) post(w http.ResponseWriter, r *http.Request) {
	req, err := decodeDrain(r.Body)
	if err != nil {
		writeDrainError(w, err)
		return
	}
	ttl, err := parseTTL(req.TTL)
	if err != nil {
		writeDrainError(w, err)
		return
	}
	a, err := s.Set(req.DrainTarget, ttl)
	if err != nil {
		writeDrainError(w, err)
		return
	}
	writeDrainJSON(w, http.StatusOK, map[string]any{"drain": a})
}

func (s *Drains) delete(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	t := DrainTarget{Service: q.Get("service"), Endpoint: q.Get("endpoint"), Node: q.Get("node")}
	if t == (DrainTarget{}) {
		req, err := decodeDrain(r.Body)
		if err != nil {
			writeDrainError(w, err)
			return
		}
		if len(req.TTL) > 0 {
			writeDrainError(w, fmt.Errorf("%w: ttl has no meaning in DELETE", ErrInvalidDrain))
			return
		}
		t = req.DrainTarget
	}
	deleted, err := s.Delete(t)
	if err != nil {
		writeDrainError(w, err)
		return
	}
	writeDrainJSON(w, http.StatusOK, map[string]any{"deleted": deleted, "target": t})
}

// decodeDrain reads one strict JSON drain request.
func decodeDrain(body io.Reader) (drainRequest, error) {
	dec := json.NewDecoder(io.LimitReader(body, maxDrainBody+1))
	dec.DisallowUnknownFields()
	var req drainRequest
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: body: %w", ErrInvalidDrain, err)
	}
	if dec.More() {
		return req, fmt.Errorf("%w: body: more than one JSON value", ErrInvalidDrain)
	}
	return req, nil
}

// parseTTL reads a TTL: a Go duration string or a number of seconds.
func parseTTL(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		d, err := time.ParseDuration(strings.TrimSpace(str))
		if err != nil {
			return 0, fmt.Errorf("%w: ttl: %w", ErrInvalidDrain, err)
		}
		return d, nil
	}
	secs, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || secs != secs || secs < 0 || secs > MaxDrainTTL.Seconds() {
		return 0, fmt.Errorf("%w: ttl %s is neither a duration like \"10m\" nor seconds in [0, %v]", ErrInvalidDrain, raw, MaxDrainTTL.Seconds())
	}
	return time.Duration(secs * float64(time.Second)), nil
}

func writeDrainError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	if errors.Is(err, ErrUnknownTarget) {
		code = http.StatusNotFound
	}
	writeDrainJSON(w, code, map[string]string{"error": err.Error()})
}

func writeDrainJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
