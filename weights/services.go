package weights

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/xds-server/xds-server/internal/httpjson"
)

// Errors of the push API and /debug/weights about a service rather than
// an endpoint.
var (
	// ErrUnknownService: discovery has no such service.
	ErrUnknownService = errors.New("unknown service")
	// ErrWeightsDisabled: discovery has the service, its weights are off.
	ErrWeightsDisabled = errors.New("weights are not enabled")
)

// ServiceState is what the pipeline knows of a service.
type ServiceState int

// Service states.
const (
	ServiceUnknown    ServiceState = iota // not in the latest discovery snapshot
	ServiceUnweighted                     // in discovery, services.<name>.weights.enabled is false
	ServiceWeighted                       // in discovery, weights enabled
)

// serviceStates tells what discovery and the configuration say of a
// service (a *Pipeline does, from the snapshots it observes).
type serviceStates interface {
	ServiceState(name string) ServiceState
}

// ServiceState reports whether the latest snapshot observed has service
// name and whether its weights are enabled.
func (p *Pipeline) ServiceState(name string) ServiceState {
	p.mu.Lock()
	inDiscovery := p.services[name]
	p.mu.Unlock()
	switch {
	case !inDiscovery:
		return ServiceUnknown
	case p.cfg.Services(name).Enabled:
		return ServiceWeighted
	}
	return ServiceUnweighted
}

// serviceError explains why service name has no weights; nil when it has.
func serviceError(name string, st ServiceState) error {
	switch st {
	case ServiceUnknown:
		return fmt.Errorf("%w %s", ErrUnknownService, name)
	case ServiceUnweighted:
		return fmt.Errorf("%w for service %s (set services.%s.weights.enabled: true, or services.\"*\".weights.enabled: true for every service)",
			ErrWeightsDisabled, name, name)
	}
	return nil
}

// serviceStatus is the HTTP status of a serviceError: 404 for an unknown
// service, 409 for a service whose weights are off.
func serviceStatus(err error) int {
	if errors.Is(err, ErrUnknownService) {
		return http.StatusNotFound
	}
	return http.StatusConflict
}

// Answers of /debug/weights?service=S for a weighted service: its table
// (StateComputed), or, before the first weight update that includes it,
// an empty one (StateWaiting) with a message saying so.
const (
	StateComputed = "computed"
	StateWaiting  = "waiting"
)

// ServiceAnswer is /debug/weights?service=S for a weighted service.
type ServiceAnswer struct {
	ServiceTable
	State   string `json:"state"`             // StateComputed or StateWaiting
	Message string `json:"message,omitempty"` // why it is waiting
}

// debugHandler answers /debug/weights?service=S for a service without
// weights with why (serviceError: 404 or 409), for a weighted service not
// in the table yet with 200 and StateWaiting, and hands every other
// request to next.
func (p *Pipeline) debugHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("service")
		if name == "" {
			next.ServeHTTP(w, r)
			return
		}
		err := serviceError(name, p.ServiceState(name))
		if err != nil {
			httpjson.Write(w, serviceStatus(err), map[string]string{"error": err.Error()})
			return
		}
		if _, ok := p.Table().Service(name); ok || r.URL.Query().Get("node") != "" {
			next.ServeHTTP(w, r)
			return
		}
		httpjson.Write(w, http.StatusOK, p.waiting(name))
	})
}

// waiting is the answer for weighted service name before its first
// weights: between discovery listing it and the next update (every
// UpdatePeriod), while it has no endpoints, or, with HA, until the
// leader's table includes it.
func (p *Pipeline) waiting(name string) ServiceAnswer {
	return ServiceAnswer{ServiceTable: ServiceTable{Name: name, Rows: []Row{}}, State: StateWaiting,
		Message: fmt.Sprintf("weights for service %s are not computed yet (weights are recomputed every %v, "+
			"weights.update_period, for services with endpoints; with ha.enabled, from the leader's table)",
			name, cmp.Or(p.cfg.UpdatePeriod, time.Second))}
}
