package weights

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// debugHandler answers /debug/weights?service=S for a service without
// weights with why (serviceError) and hands every other request to next.
func (p *Pipeline) debugHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("service")
		if name == "" {
			next.ServeHTTP(w, r)
			return
		}
		err := serviceError(name, p.ServiceState(name))
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(serviceStatus(err))
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]string{"error": err.Error()})
	})
}
