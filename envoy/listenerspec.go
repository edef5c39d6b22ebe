package envoy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HTTPListener is an HTTP listener from configuration: where Envoy
// listens, how requests are routed to service clusters, and the optional
// admission-control and rate-limit filters in front of the router.
type HTTPListener struct {
	Name             string            // listener, RouteConfiguration and proxyless api_listener name
	Address          string            // host:port Envoy binds
	Routes           []Route           // tried in order; the first match wins
	RateLimit        *RateLimit        // nil: no rate-limit filter
	AdmissionControl *AdmissionControl // nil: no admission-control filter
}

// Route sends the requests it matches to the cluster of a service, or
// shares them by weight among clusters (Split). Exactly one of Prefix,
// Path and Regex is set, and exactly one of Service and Split.
type Route struct {
	Prefix  string        // path prefix, e.g. "/api"
	Path    string        // exact path
	Regex   string        // RE2 matched against the whole path
	Headers []HeaderMatch // all must match
	Service string        // target cluster (the service's EDS cluster); "" with Split
	// Split shares the requests among clusters (TargetCluster of a service
	// and subset) by relative weight, sent as weighted_clusters: weights 0
	// are left out, a single cluster left is sent as the route's cluster.
	// The weights sum to more than 0 and at most MaxUint32.
	Split []WeightedCluster
	// Timeout bounds the whole request (all retries included); 0 means
	// unset: Envoy's default of 15s, and no bound for grpc-go.
	Timeout       time.Duration
	Retries       uint32        // retries after the first attempt; 0 means no retry policy
	RetryOn       string        // Envoy retry_on conditions; "" with Retries > 0 means DefaultRetryOn
	PerTryTimeout time.Duration // bound on each attempt; 0 means unset
}

// DefaultRetryOn are the retry conditions used when Route.RetryOn is
// empty: connection failures and 5xx for Envoy, and the gRPC status codes
// that grpc-go understands (it ignores the others).
const DefaultRetryOn = "connect-failure,refused-stream,5xx,unavailable,resource-exhausted"

// HeaderMatch matches one request header (pseudo-headers such as
// ":method" included). Exactly one of Exact, Prefix, Regex and Present is
// set; Invert negates the result.
type HeaderMatch struct {
	Name    string
	Exact   string
	Prefix  string
	Regex   string // RE2 matched against the whole value
	Present *bool  // true: the header is present; false: it is absent
	Invert  bool
}

// RateLimit configures envoy.filters.http.ratelimit and the rate limits of
// the listener's virtual host.
type RateLimit struct {
	Domain          string        // RLS domain; not empty
	Timeout         time.Duration // RLS call timeout; 0 means Envoy's default (20ms)
	FailureModeDeny bool          // deny requests when the RLS cannot be reached
	Cluster         string        // RLS cluster; "" means RateLimitClusterName
	// Actions: each entry makes one descriptor, of its actions in order.
	Actions [][]RateLimitAction
}

// RateLimitAction is one entry of a descriptor. Exactly one field is set.
type RateLimitAction struct {
	RemoteAddress    bool              // ("remote_address", the client's address)
	GenericKey       *GenericKey       // (descriptor_key or "generic_key", value)
	RequestHeaders   *RequestHeaders   // (descriptor_key, the header's value)
	HeaderValueMatch *HeaderValueMatch // (descriptor_key or "header_match", descriptor_value) when headers match
}

// GenericKey is a constant descriptor entry.
type GenericKey struct {
	Value         string // not empty
	DescriptorKey string // "" means "generic_key"
}

// RequestHeaders is a descriptor entry with a request header's value.
// When the header is absent the whole descriptor is skipped, or only this
// entry with SkipIfAbsent.
type RequestHeaders struct {
	HeaderName    string
	DescriptorKey string // not empty
	SkipIfAbsent  bool
}

// HeaderValueMatch is a constant descriptor entry present when the
// request's headers match (or, with ExpectMatch false, do not match);
// otherwise the whole descriptor is skipped.
type HeaderValueMatch struct {
	DescriptorKey   string // "" means "header_match"
	DescriptorValue string // not empty
	ExpectMatch     *bool  // nil means true
	Headers         []HeaderMatch
}

// AdmissionControl configures envoy.filters.http.admission_control, the
// client-side adaptive throttling of the SRE book (ch. 21). Envoy rejects
// a request with probability
//
//	min(MaxRejectionProbability, max(0, (n - s/SuccessRateThreshold) / (n + 1)) ^ (1/Aggression))
//
// over the last SamplingWindow (n requests, s successes). The book's
// formula is max(0, (requests - K*accepts) / (requests + 1)), so
// SuccessRateThreshold = 1/K: K = 2 is 0.5.
type AdmissionControl struct {
	SuccessRateThreshold    float64       // in (0, 1]; 0 means Envoy's default (0.95)
	Aggression              float64       // >= 1; 0 means 1 (linear)
	SamplingWindow          time.Duration // >= 1s; 0 means 30s
	RPSThreshold            uint32        // below this many requests per second nothing is rejected
	MaxRejectionProbability float64       // in (0, 1]; 0 means Envoy's default (0.8)
}

// FieldError is a problem with one field of an HTTPListener. Field is the
// path below the listener, e.g. "routes[1].timeout".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Validate checks every field of l and joins one *FieldError per problem.
func (l HTTPListener) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if !validName.MatchString(l.Name) {
		bad("name", "%q must be 1-128 characters of letters, digits, '.', '_' and '-'", l.Name)
	}
	if host, port, err := net.SplitHostPort(l.Address); err != nil {
		bad("address", "%q is not host:port: %v", l.Address, err)
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		bad("address", "%q: port must be in [0, 65535] (0: Envoy binds a free port, shown by its /listeners)", l.Address)
	} else if host == "" {
		bad("address", "%q: the host is empty (use 0.0.0.0 or :: for every address)", l.Address)
	}
	if len(l.Routes) == 0 {
		bad("routes", "at least one route is needed")
	}
	for i, r := range l.Routes {
		validateRoute(fmt.Sprintf("routes[%d]", i), r, bad)
	}
	if l.RateLimit != nil {
		validateRateLimit("ratelimit", *l.RateLimit, bad)
	}
	if ac := l.AdmissionControl; ac != nil {
		validateAdmission("admission_control", *ac, bad)
	}
	return errors.Join(errs...)
}

// validName is what we accept as a listener name: it is also a route
// configuration name, a stat prefix and part of runtime keys.
var validName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

type reporter = func(field, format string, args ...any)

func validateRoute(at string, r Route, bad reporter) {
	set := 0
	for _, s := range []string{r.Prefix, r.Path, r.Regex} {
		if s != "" {
			set++
		}
	}
	if set != 1 {
		bad(at, "exactly one of prefix, path and safe_regex is needed")
	}
	if r.Prefix != "" && r.Prefix[0] != '/' {
		bad(at+".prefix", "%q must start with /", r.Prefix)
	}
	if r.Path != "" && r.Path[0] != '/' {
		bad(at+".path", "%q must start with /", r.Path)
	}
	if r.Regex != "" {
		if _, err := regexp.Compile(r.Regex); err != nil {
			bad(at+".safe_regex", "%q is not a valid RE2 regex: %v", r.Regex, err)
		}
	}
	for j, h := range r.Headers {
		validateHeader(fmt.Sprintf("%s.headers[%d]", at, j), h, bad)
	}
	switch {
	case r.Service == "" && len(r.Split) == 0:
		bad(at+".service", "is empty")
	case r.Service != "" && len(r.Split) > 0:
		bad(at+".split", "set service or split, not both")
	case len(r.Split) > 0:
		validateSplit(at+".split", r.Split, bad)
	}
	if r.Timeout < 0 {
		bad(at+".timeout", "%v is negative", r.Timeout)
	}
	if r.PerTryTimeout < 0 {
		bad(at+".per_try_timeout", "%v is negative", r.PerTryTimeout)
	}
	if r.Retries == 0 && (r.RetryOn != "" || r.PerTryTimeout != 0) {
		bad(at+".retries", "retry_on and per_try_timeout need retries >= 1")
	}
	if r.RetryOn != "" {
		for c := range strings.SplitSeq(r.RetryOn, ",") {
			if !slices.Contains(retryConditions, strings.TrimSpace(c)) {
				bad(at+".retry_on", "%q is not one of %s", strings.TrimSpace(c), strings.Join(retryConditions, ", "))
			}
		}
	}
}

// validateSplit checks a route's weighted clusters: named, and weights
// summing to a total in [1, MaxUint32] (what Envoy and grpc-go accept).
func validateSplit(at string, split []WeightedCluster, bad reporter) {
	var sum uint64
	for k, c := range split {
		if c.Cluster == "" {
			bad(fmt.Sprintf("%s[%d].cluster", at, k), "is empty")
		}
		sum += uint64(c.Weight)
	}
	if sum == 0 {
		bad(at, "weights sum to 0")
	} else if sum > math.MaxUint32 {
		bad(at, "weights sum to %d, above %d", sum, uint64(math.MaxUint32))
	}
}

// retryConditions are Envoy's retry_on values, HTTP then gRPC; grpc-go
// honors only the gRPC ones.
var retryConditions = []string{"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure",
	"envoy-ratelimited", "retriable-4xx", "refused-stream", "retriable-status-codes", "retriable-headers",
	"http3-post-connect-failure", "cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}

func validateHeader(at string, h HeaderMatch, bad reporter) {
	if h.Name == "" {
		bad(at+".name", "is empty")
	}
	set := 0
	for _, s := range []string{h.Exact, h.Prefix, h.Regex} {
		if s != "" {
			set++
		}
	}
	if h.Present != nil {
		set++
	}
	if set != 1 {
		bad(at, "exactly one of exact, prefix, regex and present is needed")
	}
	if h.Regex != "" {
		if _, err := regexp.Compile(h.Regex); err != nil {
			bad(at+".regex", "%q is not a valid RE2 regex: %v", h.Regex, err)
		}
	}
}

func validateRateLimit(at string, rl RateLimit, bad reporter) {
	if rl.Domain == "" {
		bad(at+".domain", "is empty")
	}
	if rl.Timeout < 0 {
		bad(at+".timeout", "%v is negative", rl.Timeout)
	}
	if len(rl.Actions) == 0 {
		bad(at+".actions", "at least one descriptor (a list of actions) is needed")
	}
	for i, d := range rl.Actions {
		if len(d) == 0 {
			bad(fmt.Sprintf("%s.actions[%d]", at, i), "a descriptor needs at least one action")
		}
		for j, a := range d {
			validateAction(fmt.Sprintf("%s.actions[%d][%d]", at, i, j), a, bad)
		}
	}
}

func validateAction(at string, a RateLimitAction, bad reporter) {
	set := 0
	if a.RemoteAddress {
		set++
	}
	if g := a.GenericKey; g != nil {
		set++
		if g.Value == "" {
			bad(at+".generic_key.value", "is empty")
		}
	}
	if r := a.RequestHeaders; r != nil {
		set++
		if r.HeaderName == "" {
			bad(at+".request_headers.header_name", "is empty")
		}
		if r.DescriptorKey == "" {
			bad(at+".request_headers.descriptor_key", "is empty")
		}
	}
	if m := a.HeaderValueMatch; m != nil {
		set++
		if m.DescriptorValue == "" {
			bad(at+".header_value_match.descriptor_value", "is empty")
		}
		if len(m.Headers) == 0 {
			bad(at+".header_value_match.headers", "at least one header matcher is needed")
		}
		for k, h := range m.Headers {
			validateHeader(fmt.Sprintf("%s.header_value_match.headers[%d]", at, k), h, bad)
		}
	}
	if set != 1 {
		bad(at, "exactly one of remote_address, generic_key, request_headers and header_value_match is needed")
	}
}

func validateAdmission(at string, ac AdmissionControl, bad reporter) {
	if t := ac.SuccessRateThreshold; t < 0 || t > 1 {
		bad(at+".success_rate_threshold", "%v is not in (0, 1]", t)
	}
	if a := ac.Aggression; a != 0 && a < 1 {
		bad(at+".aggression", "%v is below 1 (Envoy treats it as 1)", a)
	}
	if w := ac.SamplingWindow; w != 0 && w < time.Second {
		bad(at+".sampling_window", "%v is below 1s (Envoy rounds it to seconds)", w)
	}
	if p := ac.MaxRejectionProbability; p < 0 || p > 1 {
		bad(at+".max_rejection_probability", "%v is not in (0, 1]", p)
	}
}
