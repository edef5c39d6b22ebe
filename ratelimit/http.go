package ratelimit

import (
	"encoding/json"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxHTTPBody bounds the debugging endpoint's request body, in bytes.
const maxHTTPBody = 1 << 20

// HTTPHandler is a JSON front end of ShouldRateLimit for debugging, to
// mount at e.g. /v1/ratelimit. POST the request as protobuf JSON
// (snake_case or camelCase):
//
//	{"domain": "messaging", "hits_addend": 1,
//	 "descriptors": [{"entries": [{"key": "to_number", "value": "2061111111"}],
//	                  "hits_addend": 0, "limit": {"requests_per_unit": 5, "unit": "MINUTE"}}]}
//
// and get the response as JSON with snake_case names: 200 when its
// overall code is OK, 429 when OVER_LIMIT (as envoyproxy/ratelimit's
// /json). A domain no rule knows is answered OK as Envoy expects, with
// the header x-ratelimit-unknown-domain and "unknown_domain": true in the
// body. Or {"error": "..."} with 400 for a malformed or invalid
// request, 405 for another method, 413 for a body over 1 MiB. The hits
// count like any other: this is not a dry run (use hits_addend 0 to
// look).
func (s *Service) HTTPHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSONError(w, http.StatusMethodNotAllowed, "use POST with a JSON RateLimitRequest")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHTTPBody))
		if err != nil {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "ratelimit: request body: "+err.Error())
			return
		}
		req := &rlsv3.RateLimitRequest{}
		if err := protojson.Unmarshal(body, req); err != nil {
			writeJSONError(w, http.StatusBadRequest, "ratelimit: malformed request: "+err.Error())
			return
		}
		resp, err := s.ShouldRateLimit(r.Context(), req)
		if err != nil {
			code := http.StatusInternalServerError
			if status.Code(err) == codes.InvalidArgument {
				code = http.StatusBadRequest
			}
			writeJSONError(w, code, status.Convert(err).Message())
			return
		}
		out, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
		if err != nil {
			writeJSONError(w, http.StatusInternalServerError, "ratelimit: encoding response: "+err.Error())
			return
		}
		if !s.Config().HasDomain(req.Domain) { // counted by ShouldRateLimit
			w.Header().Set(UnknownDomainHeader, req.Domain)
			out = append([]byte(`{"unknown_domain":true,`), out[1:]...)
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_, _ = w.Write(append(out, '\n'))
	})
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
