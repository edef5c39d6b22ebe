package weights

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
)

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
