package h2rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// raw is a client that writes frames as an adversary would.
type raw struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &raw{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.henc = hpack.NewEncoder(&r.hbuf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return r
}

// headers opens stream id for path.
func (r *raw) headers(id uint32, path string, end bool) {
	r.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		_ = r.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndHeaders: true, EndStream: end}); err != nil {
		r.t.Fatal(err)
	}
}

// message sends v as the message of stream id.
func (r *raw) message(id uint32, v string, end bool) {
	b, _ := proto.Marshal(wrapperspb.String(v))
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
	if err := r.fr.WriteData(id, end, append(msg, b...)); err != nil {
		r.t.Fatal(err)
	}
}

// until reads frames until pred says so; it fails on EOF or timeout.
func (r *raw) until(pred func(http2.Frame) bool) {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("reading frames: %v", err)
		}
		if testing.Verbose() {
			r.t.Logf("read %v", f)
		}
		if pred(f) {
			return
		}
	}
}

// closed reads until the server closes the connection (a GOAWAY
// first is fine); it fails if that does not happen within 10 s.
func (r *raw) closed() {
	r.t.Helper()
	for {
		if _, err := r.fr.ReadFrame(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				r.t.Fatal("the server did not close the connection")
			}
			return
		}
	}
}

// ended returns the id and grpc-status of a HEADERS frame that ends its
// stream.
func ended(f http2.Frame) (uint32, string, bool) {
	h, ok := f.(*http2.MetaHeadersFrame)
	if !ok || !h.StreamEnded() {
		return 0, "", false
	}
	gs := ""
	for _, hf := range h.RegularFields() {
		if hf.Name == "grpc-status" {
			gs = hf.Value
		}
	}
	return h.StreamID, gs, true
}

// Streams beyond MaxStreams are refused, and a stream reset by the client
// still counts until its handler returns (rapid reset).
func TestStreamBoundAndRapidReset(t *testing.T) {
	release := make(chan struct{})
	h := func(ctx context.Context, req, out []byte) ([]byte, error) { <-release; return out, nil }
	reg := prometheus.NewRegistry()
	s, addr := start(t, Config{Method: echoMethod, Handler: h, MaxStreams: 4, Registerer: reg, Name: "t"})
	r := dialRaw(t, addr)
	for id := uint32(1); id <= 9; id += 2 { // 5 streams: 4 run, all reset at once
		r.headers(id, echoMethod, false)
		r.message(id, "x", true)
		_ = r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	r.until(func(f http2.Frame) bool {
		rst, ok := f.(*http2.RSTStreamFrame)
		return ok && rst.StreamID == 9 && rst.ErrCode == http2.ErrCodeRefusedStream
	})
	if got := testutil.ToFloat64(s.m.active); got != 4 {
		t.Errorf("calls running = %v, want 4 (the bound)", got)
	}
	if got := testutil.ToFloat64(s.m.refused.WithLabelValues(reasonStreams)); got != 1 {
		t.Errorf("refused for streams = %v, want 1", got)
	}
	close(release)
	awaitStreams(t, s, 0)
	r.headers(11, echoMethod, false) // the slots are free again once the handlers return
	r.message(11, "y", true)
	r.until(func(f http2.Frame) bool { id, st, ok := ended(f); return ok && id == 11 && st == "0" })
}

// awaitStreams waits until the server's connections hold n streams.
func awaitStreams(t *testing.T, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		got := 0
		s.mu.Lock()
		for c := range s.conns {
			c.wmu.Lock()
			got += len(c.streams)
			c.wmu.Unlock()
		}
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("streams = %d, want %d", got, n)
		}
	}
}

// A client cannot make the server buffer more than the bounds: a message
// over MaxRecvMsgSize is refused as it arrives, and so are messages
// beyond the connection's budget.
func TestRequestBytesBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := func(ctx context.Context, req, out []byte) ([]byte, error) { <-release; return out, nil }
	s, addr := start(t, Config{Method: echoMethod, Handler: h, MaxRecvMsgSize: 100 << 10})
	r := dialRaw(t, addr)
	// A prefix announcing 4 GiB, then data: refused at 100 KiB received.
	r.headers(1, echoMethod, false)
	_ = r.fr.WriteData(1, false, []byte{0, 0xff, 0xff, 0xff, 0xff})
	chunk := make([]byte, 16<<10)
	for range 7 {
		_ = r.fr.WriteData(1, false, chunk)
	}
	r.until(func(f http2.Frame) bool { id, st, ok := ended(f); return ok && id == 1 && st == "8" }) // RESOURCE_EXHAUSTED
	// Many streams each holding 90 KiB, never finished: refused past the
	// connection's budget (2 messages of 100 KiB).
	for id := uint32(3); id <= 9; id += 2 {
		r.headers(id, echoMethod, false)
		for range 6 {
			_ = r.fr.WriteData(id, false, chunk[:15<<10])
		}
	}
	r.until(func(f http2.Frame) bool { id, st, ok := ended(f); return ok && id == 7 && st == "8" })
	s.mu.Lock()
	for c := range s.conns {
		c.wmu.Lock()
		if c.buffered > s.budget() {
			t.Errorf("connection buffers %d bytes, over its budget of %d", c.buffered, s.budget())
		}
		c.wmu.Unlock()
	}
	s.mu.Unlock()
}

// A header list over MaxHeaderListSize is answered RESOURCE_EXHAUSTED
// and the connection serves on (a single string over it ends the
// connection, as in Go's own HTTP/2 server).
func TestHeaderListBounded(t *testing.T) {
	_, addr := start(t, Config{MaxHeaderListSize: 4 << 10})
	r := dialRaw(t, addr)
	r.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":path", echoMethod}, {"content-type", "application/grpc"},
		{"x-a", strings.Repeat("a", 2<<10)}, {"x-b", strings.Repeat("b", 2<<10)}, {"x-c", strings.Repeat("c", 2<<10)}} {
		_ = r.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := r.hbuf.Bytes()
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:100]})
	_ = r.fr.WriteContinuation(1, true, block[100:])
	r.message(1, "big", true)
	r.until(func(f http2.Frame) bool { id, st, ok := ended(f); return ok && id == 1 && st == "8" })
	r.headers(3, echoMethod, false)
	r.message(3, "small", true)
	r.until(func(f http2.Frame) bool { id, st, ok := ended(f); return ok && id == 3 && st == "0" })
}

// Protocol violations end the connection with a GOAWAY; other calls on
// other connections go on.
func TestProtocolErrors(t *testing.T) {
	_, addr := start(t, Config{})
	for name, send := range map[string]func(r *raw){
		"even stream id":      func(r *raw) { r.headers(2, echoMethod, true) },
		"data on idle stream": func(r *raw) { _ = r.fr.WriteData(5, true, []byte{0}) },
		"push promise": func(r *raw) {
			_ = r.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, EndHeaders: true})
		},
		"window overflow": func(r *raw) { _ = r.fr.WriteWindowUpdate(0, 1<<31-1) },
		"oversized frame": func(r *raw) { _ = r.fr.WriteData(1, false, make([]byte, 20000)) },
		"continuation flood": func(r *raw) {
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x83}})
			junk := bytes.Repeat([]byte{0x40, 0x01, 'x', 0x01, 'y'}, 3000) // literal x: y, indexed: the table grows and wraps
			for range 100 {
				if r.fr.WriteContinuation(1, false, junk) != nil {
					return
				}
			}
		},
		"invalid setting": func(r *raw) {
			_ = r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, addr)
			send(r)
			r.closed()
		})
	}
	// Not HTTP/2 at all.
	for name, hello := range map[string]string{"http/1": "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "garbage": strings.Repeat("\x00", 24)} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(nc, hello)
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(nc); err != nil {
			t.Errorf("%s: the connection was not closed: %v", name, err)
		}
		nc.Close()
	}
	cc := dial(t, addr)
	if got, err := call(t.Context(), cc, "ok"); err != nil || got != "echo: ok" {
		t.Errorf("a well-behaved client: %q, %v", got, err)
	}
}

// An idle connection is pinged; one that does not answer is closed.
func TestKeepalive(t *testing.T) {
	_, addr := start(t, Config{PingAfter: 50 * time.Millisecond, PingTimeout: 50 * time.Millisecond})
	r := dialRaw(t, addr)
	r.until(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() })
	r.closed() // we never answer
	// grpc-go answers pings: its connection stays.
	cc := dial(t, addr)
	if _, err := call(t.Context(), cc, "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // several ping rounds; nothing to await but their passing
	if got, err := call(t.Context(), cc, "b"); err != nil || got != "echo: b" {
		t.Errorf("after idle pings: %q, %v", got, err)
	}
}

// A client that sends pings without reading the answers cannot grow the
// server's write buffer past its bound: the server stops reading.
func TestPingFloodBounded(t *testing.T) {
	s, addr := start(t, Config{})
	r := dialRaw(t, addr)
	if tc, ok := r.nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 400_000; i++ {
			if r.fr.WritePing(false, [8]byte{byte(i)}) != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second): // the server stopped reading: expected
	}
	s.mu.Lock()
	for c := range s.conns {
		c.wmu.Lock()
		if n := len(c.pending) + len(c.spare); n > maxPendingWrite+64<<10 {
			t.Errorf("server holds %d unwritten bytes, over %d", n, maxPendingWrite)
		}
		c.wmu.Unlock()
	}
	s.mu.Unlock()
	r.nc.Close()
	<-done
}

// Connections each within their own budget cannot together buffer more
// than MaxBufferedBytes: the stream that would pass it is refused, and
// what the server holds never exceeds the bound.
func TestServerBufferedBytesBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := func(ctx context.Context, req, out []byte) ([]byte, error) { <-release; return out, nil }
	const bound = 200 << 10
	s, addr := start(t, Config{Method: echoMethod, Handler: h, MaxRecvMsgSize: 100 << 10, MaxBufferedBytes: bound})
	chunk := make([]byte, 15<<10)
	// Three connections, each sending one unfinished 90 KiB request (within
	// its own 200 KiB budget): the third passes the server's 200 KiB.
	send := func() *raw {
		r := dialRaw(t, addr)
		r.headers(1, echoMethod, false)
		for range 6 {
			_ = r.fr.WriteData(1, false, chunk)
		}
		return r
	}
	for range 2 {
		r := send()
		// The connection's frames are read in order: once its PING is
		// answered, its data is buffered.
		_ = r.fr.WritePing(false, [8]byte{1})
		r.until(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() })
	}
	last := send()
	last.until(func(f http2.Frame) bool { id, st, ok := ended(f); return ok && id == 1 && st == "8" }) // RESOURCE_EXHAUSTED
	if got := s.buffered.Load(); got > bound {
		t.Errorf("server buffers %d bytes, over its bound of %d", got, bound)
	}
}
