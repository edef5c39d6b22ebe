package ratelimit

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The lean gRPC server: ShouldRateLimit as an http.Handler for Go's
// HTTP/2 server (net/http: h2c with prior knowledge, or TLS with ALPN
// "h2"), without grpc-go's transport. It serves unary calls of the one
// RLS method; anything else is answered cleanly:
//
//   - another method (server reflection, the health service, ...):
//     UNIMPLEMENTED;
//   - a compressed message (grpc-encoding other than identity):
//     UNIMPLEMENTED (clients may only compress what the server accepts,
//     and this server advertises identity only);
//   - a message over LeanConfig.MaxRecvMsgSize: RESOURCE_EXHAUSTED;
//   - HTTP/1 or a content-type other than application/grpc[+proto]:
//     HTTP 415.
//
// Deadlines (grpc-timeout) bound the decision as they do under grpc-go.

// RLSPath is the HTTP/2 :path of ShouldRateLimit.
const RLSPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// DefaultMaxRecvMsgSize is LeanConfig's default bound of a request
// message, grpc-go's default too: 4 MiB.
const DefaultMaxRecvMsgSize = 4 << 20

// LeanConfig configures LeanHandler. Zero fields take the defaults named.
type LeanConfig struct {
	// MaxRecvMsgSize bounds a request message, bytes; 0 means
	// DefaultMaxRecvMsgSize. The message is read as it arrives, so
	// memory follows what a client sent, not what it announced.
	MaxRecvMsgSize int
	// Authorize, if set, is asked first on every call with the
	// connection's TLS state (nil without TLS); a non-nil error is the
	// answer (its gRPC status, PermissionDenied if it has none).
	Authorize func(ctx context.Context, cs *tls.ConnectionState) error
	// Registerer receives ratelimit_lean_refused_total; nil keeps it
	// unregistered.
	Registerer prometheus.Registerer
}

// leanHandler serves RLSPath for a Service.
type leanHandler struct {
	svc       *Service
	max       int
	authorize func(context.Context, *tls.ConnectionState) error
	refused   *prometheus.CounterVec // by reason
}

// LeanHandler returns the lean gRPC server's handler of s.
func (s *Service) LeanHandler(c LeanConfig) (http.Handler, error) {
	if c.MaxRecvMsgSize < 0 {
		return nil, fmt.Errorf("ratelimit: max receive message size %d is negative", c.MaxRecvMsgSize)
	}
	if c.MaxRecvMsgSize == 0 {
		c.MaxRecvMsgSize = DefaultMaxRecvMsgSize
	}
	h := &leanHandler{svc: s, max: c.MaxRecvMsgSize, authorize: c.Authorize,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_lean_refused_total",
			Help: "Calls the lean gRPC server refused before deciding, by reason: not_grpc (HTTP 415), unimplemented (another method), compressed, too_large, truncated, unauthorized.",
		}, []string{"reason"})}
	for _, r := range []string{"not_grpc", "unimplemented", "compressed", "too_large", "truncated", "unauthorized"} {
		h.refused.WithLabelValues(r)
	}
	if c.Registerer != nil {
		if err := c.Registerer.Register(h.refused); err != nil {
			return nil, fmt.Errorf("ratelimit: registering metrics: %w", err)
		}
	}
	return h, nil
}

// Shared header values (read only).
var (
	hdrGRPC     = []string{"application/grpc"}
	hdrIdentity = []string{"identity"}
	hdrOK       = []string{"0"}
)

const trailerStatus = http.TrailerPrefix + "Grpc-Status"

func (h *leanHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 2 || r.Method != http.MethodPost || !isGRPCContentType(r.Header.Get("Content-Type")) {
		h.refused.WithLabelValues("not_grpc").Inc()
		http.Error(w, "ratelimit: this listener serves gRPC: HTTP/2 POST with content-type application/grpc", http.StatusUnsupportedMediaType)
		return
	}
	if r.URL.Path != RLSPath {
		h.refused.WithLabelValues("unimplemented").Inc()
		writeStatus(w, codes.Unimplemented, "ratelimit: unknown method "+r.URL.Path)
		return
	}
	ctx := r.Context()
	if t := r.Header.Get("Grpc-Timeout"); t != "" {
		d, ok := parseTimeout(t)
		if !ok {
			writeStatus(w, codes.Internal, "ratelimit: malformed grpc-timeout "+strconv.Quote(t))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if h.authorize != nil {
		if err := h.authorize(ctx, r.TLS); err != nil {
			h.refused.WithLabelValues("unauthorized").Inc()
			st, ok := status.FromError(err)
			if !ok {
				st = status.New(codes.PermissionDenied, err.Error())
			}
			writeStatus(w, st.Code(), st.Message())
			return
		}
	}
	h.call(ctx, w, r)
}

// call reads the request message, decides and answers.
func (h *leanHandler) call(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	buf := leanBufs.Get().(*[]byte)
	defer putLeanBuf(buf)
	msg, code, reason := readMessage(r.Body, (*buf)[:0], h.max)
	*buf = msg[:0]
	if code != codes.OK {
		h.refused.WithLabelValues(reason).Inc()
		writeStatus(w, code, "ratelimit: "+reasonText[reason])
		return
	}
	req := leanReqs.Get().(*rlsv3.RateLimitRequest)
	defer func() { proto.Reset(req); leanReqs.Put(req) }()
	if err := (proto.UnmarshalOptions{}).Unmarshal(msg[5:], req); err != nil {
		proto.Reset(req)
		req.Domain = malformedMarker + err.Error()
	}
	resp, err := h.svc.ShouldRateLimit(ctx, req)
	if err != nil {
		st, _ := status.FromError(err)
		writeStatus(w, st.Code(), st.Message())
		return
	}
	out := append((*buf)[:0], 0, 0, 0, 0, 0)
	if encodable(resp) {
		out = appendResponse(out, resp)
	} else if out, err = (proto.MarshalOptions{}).MarshalAppend(out, resp); err != nil {
		writeStatus(w, codes.Internal, "ratelimit: encoding the response: "+err.Error())
		return
	}
	*buf = out[:0]
	binary.BigEndian.PutUint32(out[1:5], uint32(len(out)-5))
	hdr := w.Header()
	hdr["Content-Type"] = hdrGRPC
	hdr["Grpc-Accept-Encoding"] = hdrIdentity
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	hdr[trailerStatus] = hdrOK
}

// leanBufs hold request and response messages; a buffer that grew past
// 64 KiB is dropped rather than kept.
var leanBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func putLeanBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		leanBufs.Put(b)
	}
}

var leanReqs = sync.Pool{New: func() any { return new(rlsv3.RateLimitRequest) }}

var reasonText = map[string]string{
	"compressed": "compressed messages are not supported (this server accepts grpc-encoding identity only)",
	"too_large":  "request message larger than the maximum",
	"truncated":  "request ended inside a message (or carried none)",
}

// readMessage reads one length-prefixed gRPC message from body into buf
// (prefix included), growing buf only as bytes arrive. A reason is
// returned with a code other than OK.
func readMessage(body io.Reader, buf []byte, limit int) ([]byte, codes.Code, string) {
	buf = append(buf[:0], 0, 0, 0, 0, 0)
	if _, err := io.ReadFull(body, buf[:5]); err != nil {
		return buf, codes.Internal, "truncated"
	}
	switch buf[0] {
	case 0:
	case 1:
		return buf, codes.Unimplemented, "compressed"
	default:
		return buf, codes.Internal, "truncated"
	}
	n := binary.BigEndian.Uint32(buf[1:5])
	if uint64(n) > uint64(limit) {
		return buf, codes.ResourceExhausted, "too_large"
	}
	for need := 5 + int(n); len(buf) < need; {
		if cap(buf) == len(buf) { // grow by at most what arrived so far
			buf = slices.Grow(buf, min(need-len(buf), max(len(buf), 512)))
		}
		m, err := body.Read(buf[len(buf):min(need, cap(buf))])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < need {
			return buf, codes.Internal, "truncated"
		}
	}
	return buf, codes.OK, ""
}

// writeStatus answers a call with a status and no message: a
// trailers-only response.
func writeStatus(w http.ResponseWriter, code codes.Code, msg string) {
	hdr := w.Header()
	hdr["Content-Type"] = hdrGRPC
	hdr["Grpc-Status"] = []string{strconv.Itoa(int(code))}
	if msg != "" {
		hdr["Grpc-Message"] = []string{encodeGRPCMessage(msg)}
	}
	w.WriteHeader(http.StatusOK)
}

// encodeGRPCMessage percent-encodes msg as the gRPC spec asks of
// grpc-message: bytes outside printable ASCII, and '%'.
func encodeGRPCMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest == "+proto" || strings.HasPrefix(rest, ";"))
}

// parseTimeout parses grpc-timeout: at most 8 digits and a unit.
func parseTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	v, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if time.Duration(v) > (1<<63-1)/unit {
		return 1<<63 - 1, true
	}
	return time.Duration(v) * unit, true
}
