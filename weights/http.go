package weights

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
var httpRejectReasons = []string{"method", "too_large", "malformed", "invalid_report", "unknown_endpoint", "sink_error"}

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
	maxBody  int64 // bytes
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
		sink:    cfg.Sink,
		maxBody: cmp.Or(cfg.MaxBody, DefaultHTTPMaxBody),
		now:     cfg.Now,
		log:     cmp.Or(cfg.Logger, slog.Default()).With("component", "weights.http"),
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
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{h.accepted, h.rejected} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("weights: http: metrics: %w", err)
			}
		}
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
	writeJSON(w, http.StatusOK, struct {
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
		if n++; n <= maxHTTPErrors {
			errs = append(errs, fmt.Errorf("report %d: %w: %q/%q", i, ErrUnknownEndpoint, r.Service, r.Endpoint))
		}
	}
	if err := joinLimited(errs, n, "unknown endpoints"); err != nil {
		return fmt.Errorf("weights: http: %w", err)
	}
	return nil
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
	writeJSON(w, status, struct {
		Error    string `json:"error"`
		Accepted int    `json:"accepted,omitempty"` // reports observed before the error
	}{err.Error(), accepted})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

// loadJSON is one report on the wire. Fields stay raw so that every
// problem can be named with its field (and out-of-range numbers such as
// 1e400 rejected cleanly); absent fields are nil, null is "null".
type loadJSON struct {
	Service     json.RawMessage `json:"service"`
	Endpoint    json.RawMessage `json:"endpoint"`
	QPS         json.RawMessage `json:"qps"`
	EPS         json.RawMessage `json:"eps"`
	Utilization json.RawMessage `json:"utilization"`
	App         json.RawMessage `json:"application_utilization"`
	CPU         json.RawMessage `json:"cpu_utilization"`
	Named       json.RawMessage `json:"named"`
}

// loadEnvelope is a top-level object: a batch (Reports set) or one report.
type loadEnvelope struct {
	loadJSON
	Reports json.RawMessage `json:"reports"`
}

func (l loadJSON) empty() bool {
	return l.Service == nil && l.Endpoint == nil && l.QPS == nil && l.EPS == nil &&
		l.Utilization == nil && l.App == nil && l.CPU == nil && l.Named == nil
}

// DecodeLoad decodes the body of POST /v1/load: one report object,
//
//	{"service": "api", "endpoint": "api-1", "utilization": 0.42, "qps": 120.5, "eps": 0.3}
//
// a batch {"reports": [report, ...]} or an array [report, ...], of 1 to
// 10,000 reports. Fields: service and endpoint (strings, required); qps
// and eps (requests and errors per second, in [0, MaxRate]); utilization,
// the application utilization in [0, MaxUtilization] (0 = unknown), or
// its synonym application_utilization (not both); cpu_utilization (same
// range); named ({"name": number}, at most MaxNamed). Absent or null
// numbers are 0.
//
// It is strict: unknown fields, trailing data, numbers out of float64
// range (1e400) or out of their field's range are errors naming the
// report (by index in a batch) and the field; value errors wrap
// ErrInvalidReport. The reports are backend reports (Node "") with At
// zero: the caller stamps the time of receipt, and then each passes
// Report.Validate. It does no I/O and reads no clock.
func DecodeLoad(body []byte) ([]Report, error) {
	items, batch, err := decodeItems(body)
	if err != nil {
		return nil, fmt.Errorf("weights: http: %w", err)
	}
	reports := make([]Report, len(items))
	var errs []error
	n := 0
	for i, it := range items {
		r, err := it.report()
		if err == nil {
			reports[i] = r
			continue
		}
		if n++; n <= maxHTTPErrors {
			if batch {
				err = fmt.Errorf("report %d: %w", i, err)
			}
			errs = append(errs, err)
		}
	}
	if err := joinLimited(errs, n, "invalid reports"); err != nil {
		return nil, fmt.Errorf("weights: http: %w", err)
	}
	return reports, nil
}

// decodeItems splits body into its reports' raw fields; batch is false
// for a single report object.
func decodeItems(body []byte) (items []loadJSON, batch bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, false, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, fmt.Errorf("%w: trailing data after the JSON value", errMalformed)
	}
	switch top[0] {
	case '[':
		items, err = decodeArray(top)
		return items, true, err
	case '{':
		var env loadEnvelope
		if err := decodeStrict(top, &env); err != nil {
			return nil, false, err
		}
		if env.Reports == nil {
			return []loadJSON{env.loadJSON}, false, nil
		}
		if !env.loadJSON.empty() {
			return nil, false, fmt.Errorf("%w: a batch (\"reports\") cannot have report fields", errMalformed)
		}
		items, err = decodeArray(env.Reports)
		return items, true, err
	}
	return nil, false, fmt.Errorf("%w: the body must be a JSON object or array", errMalformed)
}

// decodeArray decodes a JSON array of report objects, of 1 to
// maxHTTPReports elements.
func decodeArray(raw json.RawMessage) ([]loadJSON, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, fmt.Errorf("%w: reports must be an array", errMalformed)
	}
	var items []loadJSON
	for dec.More() {
		if len(items) == maxHTTPReports {
			return nil, fmt.Errorf("%w: more than %d", errTooMany, maxHTTPReports)
		}
		var elem json.RawMessage
		if err := dec.Decode(&elem); err != nil {
			return nil, fmt.Errorf("%w: report %d: %w", errMalformed, len(items), err)
		}
		if elem[0] != '{' {
			return nil, fmt.Errorf("%w: report %d is not an object", errMalformed, len(items))
		}
		var it loadJSON
		if err := decodeStrict(elem, &it); err != nil {
			return nil, fmt.Errorf("report %d: %w", len(items), err)
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%w: no reports", errMalformed)
	}
	return items, nil
}

// decodeStrict decodes one JSON object, refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	return nil
}

// report converts l, checking every field; the error wraps
// ErrInvalidReport.
func (l loadJSON) report() (Report, error) {
	var p fieldParser
	r := Report{
		Service:  p.str("service", l.Service),
		Endpoint: p.str("endpoint", l.Endpoint),
		QPS:      p.rangeNum("qps", l.QPS, MaxRate),
		EPS:      p.rangeNum("eps", l.EPS, MaxRate),
		CPU:      p.rangeNum("cpu_utilization", l.CPU, MaxUtilization),
		App:      p.rangeNum("application_utilization", l.App, MaxUtilization),
		Named:    p.named(l.Named),
	}
	if present(l.Utilization) {
		if present(l.App) {
			p.errs = append(p.errs, errors.New("utilization and application_utilization are synonyms: set one"))
		}
		r.App = p.rangeNum("utilization", l.Utilization, MaxUtilization)
	}
	if len(p.errs) > 0 {
		return Report{}, fmt.Errorf("%w %q/%q: %w", ErrInvalidReport, r.Service, r.Endpoint, errors.Join(p.errs...))
	}
	v := r
	v.At = validateAt
	if err := v.Validate(); err != nil {
		return Report{}, err
	}
	return r, nil
}

// present reports whether a raw field was given and not null.
func present(raw json.RawMessage) bool {
	return raw != nil && string(raw) != "null"
}

// fieldParser converts raw fields, collecting one error per bad field.
type fieldParser struct {
	errs []error
}

func (p *fieldParser) str(field string, raw json.RawMessage) string {
	if !present(raw) {
		return ""
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		p.errs = append(p.errs, fmt.Errorf("%s is not a string", field))
		return ""
	}
	return s
}

// num parses a JSON number; absent or null is 0. Numbers beyond float64
// (1e400) are errors; those below its precision (1e-400) are 0.
func (p *fieldParser) num(field string, raw json.RawMessage) float64 {
	if !present(raw) {
		return 0
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		p.errs = append(p.errs, fmt.Errorf("%s is not a number", field))
		return 0
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		s := string(raw)
		if len(s) > 32 {
			s = s[:32] + "..."
		}
		p.errs = append(p.errs, fmt.Errorf("%s %s is out of range", field, s))
		return 0
	}
	return v
}

// rangeNum is num restricted to [0, limit].
func (p *fieldParser) rangeNum(field string, raw json.RawMessage, limit float64) float64 {
	n := len(p.errs)
	v := p.num(field, raw)
	if len(p.errs) == n {
		p.errs = appendRange(p.errs, field, v, limit)
	}
	return v
}

func (p *fieldParser) named(raw json.RawMessage) map[string]float64 {
	if !present(raw) {
		return nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		p.errs = append(p.errs, errors.New("named is not an object"))
		return nil
	}
	if len(m) > MaxNamed {
		p.errs = append(p.errs, fmt.Errorf("%d named metrics (at most %d)", len(m), MaxNamed))
		return nil
	}
	out := make(map[string]float64, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = p.num(fmt.Sprintf("named %q", k), m[k])
	}
	return out
}

// joinLimited joins the first errors of n (errs holds at most
// maxHTTPErrors of them), noting how many more there were; nil if n == 0.
func joinLimited(errs []error, n int, what string) error {
	if n == 0 {
		return nil
	}
	if n > len(errs) {
		errs = append(errs, fmt.Errorf("and %d more %s", n-len(errs), what))
	}
	return errors.Join(errs...)
}
