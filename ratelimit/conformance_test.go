package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"gopkg.in/yaml.v3"
)

// fixtureStart is the default start of a fixture's clock: the start of a
// day (and so of its hours, minutes and seconds).
var fixtureStart = time.Date(2023, 11, 14, 0, 0, 0, 0, time.UTC)

// fixture is one conformance case of testdata/conformance: a
// configuration, service options, and requests with their expected
// answers at given times.
type fixture struct {
	Config  string         `yaml:"config"`
	Service fixtureService `yaml:"service"`
	Steps   []fixtureStep  `yaml:"steps"`
}

type fixtureService struct {
	Headers     bool   `yaml:"headers"`
	FailureMode string `yaml:"failure_mode"`
}

type fixtureStep struct {
	Name string `yaml:"name"`
	// At is the clock's offset from fixtureStart (a Go duration); empty
	// keeps the previous step's time.
	At string `yaml:"at"`
	// Repeat sends the request that many times (default 1); Want applies
	// to the last answer.
	Repeat  int          `yaml:"repeat"`
	Request yaml.Node    `yaml:"request"` // a RateLimitRequest as protobuf JSON, in YAML
	Want    wantResponse `yaml:"want"`
}

type wantResponse struct {
	Code     string            `yaml:"code"`  // OK (default) or OVER_LIMIT
	Error    string            `yaml:"error"` // InvalidArgument whose message contains this
	Statuses []wantStatus      `yaml:"statuses"`
	Headers  map[string]string `yaml:"headers"` // exactly these response headers
}

// wantStatus is one expected descriptor status; every field is compared
// (absent means zero: no current limit, no reset).
type wantStatus struct {
	Code      string `yaml:"code"`
	Limit     string `yaml:"limit"` // "5/day"
	Name      string `yaml:"name"`
	Remaining uint32 `yaml:"remaining"`
	Reset     string `yaml:"reset"` // a Go duration
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// runConformance runs every fixture of testdata/conformance against a
// service over a fresh store from newStore.
func runConformance(t *testing.T, newStore func(t *testing.T) Store) {
	paths, err := filepath.Glob(filepath.Join("testdata", "conformance", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".yaml"), func(t *testing.T) {
			runFixture(t, readFixture(t, p), newStore(t))
		})
	}
}

func readFixture(t *testing.T, path string) fixture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f fixture
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

func runFixture(t *testing.T, f fixture, store Store) {
	cfg, err := Load(File{Name: "config.yaml", Data: []byte(f.Config)})
	if err != nil {
		t.Fatal(err)
	}
	mode, err := ParseFailureMode(f.Service.FailureMode)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: fixtureStart}
	svc, err := NewService(ServiceConfig{Store: store, Config: cfg, Headers: f.Service.Headers,
		FailureMode: mode, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range f.Steps {
		if st.At != "" {
			d, err := time.ParseDuration(st.At)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			clock.Set(fixtureStart.Add(d))
		}
		req := fixtureRequest(t, &st.Request)
		var resp *rlsv3.RateLimitResponse
		for range max(st.Repeat, 1) {
			resp, err = svc.ShouldRateLimit(context.Background(), req)
		}
		if msg := checkAnswer(st.Want, resp, err); msg != "" {
			t.Errorf("step %d %q: %s", i, st.Name, msg)
		}
	}
}

// fixtureRequest converts a step's YAML request to a RateLimitRequest
// through protobuf JSON.
func fixtureRequest(t *testing.T, n *yaml.Node) *rlsv3.RateLimitRequest {
	t.Helper()
	var v any
	if err := n.Decode(&v); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	req := &rlsv3.RateLimitRequest{}
	if err := protojson.Unmarshal(js, req); err != nil {
		t.Fatalf("request %s: %v", js, err)
	}
	return req
}

// checkAnswer compares an answer with the expectation; "" when it
// matches.
func checkAnswer(w wantResponse, resp *rlsv3.RateLimitResponse, err error) string {
	if w.Error != "" {
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), w.Error) {
			return "got error " + errString(err) + ", want InvalidArgument containing " + w.Error
		}
		return ""
	}
	if err != nil {
		return "unexpected error " + err.Error()
	}
	var b strings.Builder
	want := w.Code
	if want == "" {
		want = "OK"
	}
	if got := resp.OverallCode.String(); got != want {
		b.WriteString("overall code " + got + ", want " + want + "; ")
	}
	got := describeStatuses(resp)
	if exp := describeWant(w.Statuses); got != exp {
		b.WriteString("statuses\n  " + got + "\nwant\n  " + exp + "\n")
	}
	if gh, wh := describeHeaders(resp), describeWantHeaders(w.Headers); gh != wh {
		b.WriteString("headers " + gh + ", want " + wh)
	}
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

func describeStatuses(resp *rlsv3.RateLimitResponse) string {
	var parts []string
	for _, st := range resp.Statuses {
		ws := wantStatus{Code: st.Code.String(), Remaining: st.LimitRemaining}
		if l := st.CurrentLimit; l != nil {
			ws.Limit = fmtUint(l.RequestsPerUnit) + "/" + strings.ToLower(l.Unit.String())
			ws.Name = l.Name
		}
		if st.DurationUntilReset != nil {
			ws.Reset = st.DurationUntilReset.AsDuration().String()
		}
		parts = append(parts, fmtStatus(ws))
	}
	return strings.Join(parts, "\n  ")
}

func describeWant(ws []wantStatus) string {
	var parts []string
	for _, w := range ws {
		if w.Reset != "" {
			if d, err := time.ParseDuration(w.Reset); err == nil {
				w.Reset = d.String()
			}
		}
		parts = append(parts, fmtStatus(w))
	}
	return strings.Join(parts, "\n  ")
}

func fmtStatus(w wantStatus) string {
	return "{" + w.Code + " limit=" + w.Limit + " name=" + w.Name + " remaining=" + fmtUint(w.Remaining) +
		" reset=" + w.Reset + "}"
}

func describeHeaders(resp *rlsv3.RateLimitResponse) string {
	var parts []string
	for _, h := range resp.ResponseHeadersToAdd {
		parts = append(parts, h.Key+": "+h.Value)
	}
	return strings.Join(parts, "; ")
}

func describeWantHeaders(h map[string]string) string {
	var parts []string
	for _, k := range []string{HeaderLimit, HeaderRemaining, HeaderReset} {
		if v, ok := h[k]; ok {
			parts = append(parts, k+": "+v)
		}
	}
	return strings.Join(parts, "; ")
}

func fmtUint(v uint32) string {
	b, _ := json.Marshal(v)
	return string(b)
}
