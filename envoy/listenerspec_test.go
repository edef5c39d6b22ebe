package envoy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func goodListener() HTTPListener {
	return HTTPListener{Name: "ingress", Address: "0.0.0.0:10000", Routes: []Route{{Prefix: "/", Service: "web"}}}
}

// TestListenerValidate checks that each problem is reported with its
// field path, and that the builders refuse an invalid listener.
func TestListenerValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mod  func(*HTTPListener)
		want string
	}{
		"bad name":          {func(l *HTTPListener) { l.Name = "a/b" }, "name: "},
		"no port":           {func(l *HTTPListener) { l.Address = "0.0.0.0" }, "address: "},
		"port too large":    {func(l *HTTPListener) { l.Address = "0.0.0.0:65536" }, "address: "},
		"empty host":        {func(l *HTTPListener) { l.Address = ":10000" }, "address: \":10000\": the host is empty"},
		"no routes":         {func(l *HTTPListener) { l.Routes = nil }, "routes: at least one"},
		"two path matchers": {func(l *HTTPListener) { l.Routes[0].Path = "/x" }, "routes[0]: exactly one of prefix"},
		"no path matcher":   {func(l *HTTPListener) { l.Routes[0].Prefix = "" }, "routes[0]: exactly one of prefix"},
		"relative prefix":   {func(l *HTTPListener) { l.Routes[0].Prefix = "api" }, "routes[0].prefix: \"api\" must start with /"},
		"bad regex":         {func(l *HTTPListener) { l.Routes[0] = Route{Regex: "(", Service: "web"} }, "routes[0].safe_regex: "},
		"no service":        {func(l *HTTPListener) { l.Routes[0].Service = "" }, "routes[0].service: is empty"},
		"service and split": {func(l *HTTPListener) { l.Routes[0].Split = []WeightedCluster{{Cluster: "web~v1", Weight: 1}} },
			"routes[0].split: set service or split, not both"},
		"split cluster empty": {func(l *HTTPListener) { l.Routes[0].Service, l.Routes[0].Split = "", []WeightedCluster{{Weight: 1}} },
			"routes[0].split[0].cluster: is empty"},
		"split weights 0": {func(l *HTTPListener) {
			l.Routes[0].Service, l.Routes[0].Split = "", []WeightedCluster{{Cluster: "a"}, {Cluster: "b"}}
		}, "routes[0].split: weights sum to 0"},
		"split weights above MaxUint32": {func(l *HTTPListener) {
			l.Routes[0].Service, l.Routes[0].Split = "", []WeightedCluster{{Cluster: "a", Weight: 1 << 31}, {Cluster: "b", Weight: 1 << 31}}
		}, "routes[0].split: weights sum to 4294967296, above 4294967295"},
		"negative timeout":   {func(l *HTTPListener) { l.Routes[0].Timeout = -time.Second }, "routes[0].timeout: -1s is negative"},
		"retry_on, no retry": {func(l *HTTPListener) { l.Routes[0].RetryOn = "5xx" }, "routes[0].retries: "},
		"bad retry_on": {func(l *HTTPListener) { l.Routes[0].Retries, l.Routes[0].RetryOn = 1, "5xx,bogus" },
			"routes[0].retry_on: \"bogus\" is not one of"},
		"header without matcher": {func(l *HTTPListener) { l.Routes[0].Headers = []HeaderMatch{{Name: "x"}} }, "routes[0].headers[0]: exactly one"},
		"header two matchers": {func(l *HTTPListener) {
			l.Routes[0].Headers = []HeaderMatch{{Name: "x", Exact: "a", Present: ptr(true)}}
		},
			"routes[0].headers[0]: exactly one"},
		"header without name":    {func(l *HTTPListener) { l.Routes[0].Headers = []HeaderMatch{{Exact: "a"}} }, "routes[0].headers[0].name: is empty"},
		"ratelimit no domain":    {func(l *HTTPListener) { l.RateLimit = &RateLimit{Actions: [][]RateLimitAction{{{RemoteAddress: true}}}} }, "ratelimit.domain: is empty"},
		"ratelimit no actions":   {func(l *HTTPListener) { l.RateLimit = &RateLimit{Domain: "d"} }, "ratelimit.actions: at least one"},
		"ratelimit empty action": {func(l *HTTPListener) { l.RateLimit = &RateLimit{Domain: "d", Actions: [][]RateLimitAction{{}}} }, "ratelimit.actions[0]: a descriptor needs"},
		"action with two kinds": {func(l *HTTPListener) {
			l.RateLimit = &RateLimit{Domain: "d", Actions: [][]RateLimitAction{{{RemoteAddress: true, GenericKey: &GenericKey{Value: "v"}}}}}
		}, "ratelimit.actions[0][0]: exactly one of"},
		"request_headers without key": {func(l *HTTPListener) {
			l.RateLimit = &RateLimit{Domain: "d", Actions: [][]RateLimitAction{{{RequestHeaders: &RequestHeaders{HeaderName: "x"}}}}}
		}, "ratelimit.actions[0][0].request_headers.descriptor_key: is empty"},
		"header_value_match without headers": {func(l *HTTPListener) {
			l.RateLimit = &RateLimit{Domain: "d", Actions: [][]RateLimitAction{{{HeaderValueMatch: &HeaderValueMatch{DescriptorValue: "v"}}}}}
		}, "ratelimit.actions[0][0].header_value_match.headers: at least one"},
		"threshold above 1":  {func(l *HTTPListener) { l.AdmissionControl = &AdmissionControl{SuccessRateThreshold: 2} }, "admission_control.success_rate_threshold: 2 is not in (0, 1]"},
		"aggression below 1": {func(l *HTTPListener) { l.AdmissionControl = &AdmissionControl{Aggression: 0.5} }, "admission_control.aggression: 0.5 is below 1"},
		"short window":       {func(l *HTTPListener) { l.AdmissionControl = &AdmissionControl{SamplingWindow: time.Millisecond} }, "admission_control.sampling_window: "},
	} {
		t.Run(name, func(t *testing.T) {
			l := goodListener()
			tc.mod(&l)
			err := l.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate() = %T, want *FieldError inside", err)
			}
			if _, err := BuildHTTPListener(l); err == nil {
				t.Error("BuildHTTPListener: no error")
			}
		})
	}
	if err := goodListener().Validate(); err != nil {
		t.Errorf("good listener: %v", err)
	}
}
