package weights

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xds-server/xds-server/internal/httpjson"
	"github.com/xds-server/xds-server/internal/metricreg"
)

const (
	// DefaultHTTPMaxBody is HTTPConfig.MaxBody's default, in bytes.
	DefaultHTTPMaxBody = 1 << 20
	maxHTTPReports     = 10000 // reports in one request
	maxHTTPErrors      = 10    // errors listed in one response
)

var (
	errTooMany   = errors.New("too many reports") // more than maxHTTPReports (413)
	errMalformed = errors.New("malformed load")   // not the expected JSON (400)
	// validateAt stands in for the time of receipt while DecodeLoad
	// validates: Report.Validate requires a time.
	validateAt = time.Unix(1, 0)
)

// Reasons of xds_weights_http_rejected_total.
var httpRejectReasons = []string{"method", "too_large", "malformed", "invalid_report", "unknown_endpoint", "unknown_service", "weights_disabled", "sink_error"}

// loadSink receives the accepted reports.
type loadSink interface {
	Observe(r Report, now time.Time) error
}

// endpointKnower is a sink that can tell ahead of Observe whether it
// knows an endpoint (*Tracker can): a batch naming an unknown endpoint is
// then refused before any report is observed.
type endpointKnower interface {
	Known(service, endpoint string) bool
}

// Known reports whether t tracks endpoint of service (SetEndpoints): for
// it, Observe does not return ErrUnknownEndpoint.
func (t *Tracker) Known(service, endpoint string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lookup(service, endpoint) != nil
}

// HTTPConfig configures NewHTTPHandler.
type HTTPConfig struct {
	// Sink receives the accepted reports, with At the time of receipt;
	// required (a *Tracker). When it also has Known(service, endpoint
	// string) bool, as *Tracker does, a batch is checked against it before
	// any report is observed; otherwise a sink error stops the batch where
	// it occurs and the reports before it stay observed. Sink errors
	// wrapping ErrUnknownEndpoint or ErrInvalidReport are 400, others 500.
	Sink interface {
		Observe(r Report, now time.Time) error
	}
	// Services, if set, explains reports naming a service without weights:
	// 404 for a service discovery does not have (ErrUnknownService), 409
	// for one whose weights are off (ErrWeightsDisabled), instead of 400
	// unknown endpoint.
	Services serviceStates
	// MaxBody bounds the request body in bytes (>= 0); 0 means
	// DefaultHTTPMaxBody (1 MiB).
	MaxBody int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger logs rejected requests (debug) and sink failures (error); nil
	// means slog.Default().
	Logger *slog.Logger
	// Registerer gets xds_weights_http_reports_total (reports accepted)
	// and xds_weights_http_rejected_total{reason} (requests rejected); nil
	// registers nothing.
	Registerer prometheus.Registerer
}

// Validate reports every invalid field at once, wrapping ErrInvalidConfig.
func (c HTTPConfig) Validate() error {
	var errs []error
	if c.Sink == nil {
		errs = append(errs, errors.New("sink is nil"))
	} else if t, ok := c.Sink.(*Tracker); ok && t == nil {
		errs = append(errs, errors.New("sink is a nil *Tracker"))
	}
	if c.MaxBody < 0 {
		errs = append(errs, fmt.Errorf("max body %d is negative", c.MaxBody))
	}
	if len(errs) == 0 {
		return nil
	}
	return httpConfigError{errors.Join(errs...)}
}

type httpConfigError struct{ err error }

func (e httpConfigError) Error() string   { return "weights: http: invalid config: " + e.err.Error() }
func (e httpConfigError) Unwrap() []error { return []error{ErrInvalidConfig, e.err} }

type httpHandler struct {
	sink     loadSink
	services serviceStates // nil: reports of services without weights are unknown endpoints
	maxBody  int64         // bytes
	now      func() time.Time
	log      *slog.Logger
	accepted prometheus.Counter
	rejected *prometheus.CounterVec
}

// NewHTTPHandler returns the handler of the HTTP push API, POST /v1/load
// on the admin server, for backends that speak neither ORCA nor LRS (it
// answers 405 to other methods and does not look at the path). The body
// is one report, a batch {"reports": [...]} or an array of reports (see
// DecodeLoad). Decoding errors are 400 (413 for more than 10,000 reports
// or a body over MaxBody), and so are endpoints the sink does not know.
// The batch is checked whole before any report is observed. Success is
// 200 {"accepted": N}; errors are {"error": "..."}, both
// application/json. The error is that of cfg.Validate or of registering
// the metrics.
func NewHTTPHandler(cfg HTTPConfig) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &httpHandler{
		sink:     cfg.Sink,
		services: cfg.Services,
		maxBody:  cmp.Or(cfg.MaxBody, DefaultHTTPMaxBody),
		now:      cfg.Now,
		log:      cmp.Or(cfg.Logger, slog.Default()).With("component", "weights.http"),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "xds_weights_http_reports_total",
			Help: "Load reports accepted by the HTTP push API (POST /v1/load).",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xds_weights_http_rejected_total",
			Help: "Requests to the HTTP push API rejected, by reason.",
		}, []string{"reason"}),
	}
	if h.now == nil {
		h.now = time.Now
	}
	for _, reason := range httpRejectReasons {
		h.rejected.WithLabelValues(reason) // export zeros
	}
	if err := metricreg.Register(cfg.Registerer, h.accepted, h.rejected); err != nil {
		return nil, fmt.Errorf("weights: http: metrics: %w", err)
	}
	return h, nil
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, fmt.Errorf("weights: http: method %s not allowed: use POST", r.Method), 0)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err, 0)
		return
	}
	reports, err := DecodeLoad(body)
	if err != nil {
		h.fail(w, r, err, 0)
		return
	}
	now := h.now()
	for i := range reports {
		reports[i].At = now
	}
	if err := h.checkKnown(reports); err != nil {
		h.fail(w, r, err, 0)
		return
	}
	for i, rep := range reports {
		if err := h.sink.Observe(rep, now); err != nil {
			// The sink cannot tell ahead, or discovery removed the
			// endpoint since checkKnown: reports before i stay observed.
			h.accepted.Add(float64(i))
			h.fail(w, r, fmt.Errorf("weights: http: report %d: %w", i, err), i)
			return
		}
	}
	h.accepted.Add(float64(len(reports)))
	httpjson.WriteCompact(w, http.StatusOK, struct {
		Accepted int `json:"accepted"`
	}{len(reports)})
}

// readBody reads the body, at most h.maxBody bytes: a larger body is an
// error wrapping *http.MaxBytesError.
func (h *httpHandler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > h.maxBody {
		return nil, fmt.Errorf("weights: http: body of %d bytes: %w", r.ContentLength, &http.MaxBytesError{Limit: h.maxBody})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, fmt.Errorf("weights: http: body: %w", err)
		}
		return nil, fmt.Errorf("weights: http: reading body: %w: %w", errMalformed, err)
	}
	return body, nil
}

// checkKnown returns an error wrapping ErrUnknownEndpoint naming the
// reports whose endpoint the sink does not know, when it can tell.
func (h *httpHandler) checkKnown(reports []Report) error {
	k, ok := h.sink.(endpointKnower)
	if !ok {
		return nil
	}
	var errs []error
	n := 0
	for i, r := range reports {
		if k.Known(r.Service, r.Endpoint) {
			continue
		}
		if err := h.serviceError(r.Service); err != nil {
			return fmt.Errorf("weights: http: report %d: %w", i, err)
		}
		if n++; n <= maxHTTPErrors {
			errs = append(errs, fmt.Errorf("report %d: %w: %q/%q", i, ErrUnknownEndpoint, r.Service, r.Endpoint))
		}
	}
	if err := joinLimited(errs, n, "unknown endpoints"); err != nil {
		return fmt.Errorf("weights: http: %w", err)
	}
	return nil
}

// serviceError explains a report of a service without weights (nil when
// it has weights, or nothing can tell).
func (h *httpHandler) serviceError(name string) error {
	if h.services == nil {
		return nil
	}
	return serviceError(name, h.services.ServiceState(name))
}

// fail answers a rejected request, counts and logs it; accepted is the
// number of reports observed before the failure (usually 0).
func (h *httpHandler) fail(w http.ResponseWriter, r *http.Request, err error, accepted int) {
	status, reason := http.StatusInternalServerError, "sink_error"
	switch {
	case r.Method != http.MethodPost:
		status, reason = http.StatusMethodNotAllowed, "method"
	case errors.Is(err, errTooMany):
		status, reason = http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, ErrUnknownService):
		status, reason = http.StatusNotFound, "unknown_service"
	case errors.Is(err, ErrWeightsDisabled):
		status, reason = http.StatusConflict, "weights_disabled"
	case errors.Is(err, ErrUnknownEndpoint):
		status, reason = http.StatusBadRequest, "unknown_endpoint"
	case errors.Is(err, ErrInvalidReport):
		status, reason = http.StatusBadRequest, "invalid_report"
	case errors.Is(err, errMalformed):
		status, reason = http.StatusBadRequest, "malformed"
	default:
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status, reason = http.StatusRequestEntityTooLarge, "too_large"
		}
	}
	h.rejected.WithLabelValues(reason).Inc()
	level := slog.LevelDebug
	if status >= http.StatusInternalServerError {
		level = slog.LevelError
	}
	h.log.Log(r.Context(), level, "pushed load rejected", "reason", reason, "status", status,
		"error", err, "remote_addr", r.RemoteAddr, "accepted", accepted)
	httpjson.WriteCompact(w, status, struct {
		Error    string `json:"error"`
		Accepted int    `json:"accepted,omitempty"` // reports observed before the error
	}{err.Error(), accepted})
}
