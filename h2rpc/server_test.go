package h2rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/xds-server/xds-server/certs/certstest"
)

const echoMethod = "/test.Echo/Echo"

// echo answers a StringValue with "echo: " and its value; values
// starting with "fail " are answered with that status code and message,
// "wait" waits for the deadline, "deadline" says whether there is one
// and how far.
func echo(ctx context.Context, req, out []byte) ([]byte, error) {
	in := new(wrapperspb.StringValue)
	if err := proto.Unmarshal(req, in); err != nil {
		return out, status.Error(codes.InvalidArgument, err.Error())
	}
	v := in.Value
	switch {
	case strings.HasPrefix(v, "fail "):
		return out, status.Error(codes.InvalidArgument, strings.TrimPrefix(v, "fail "))
	case v == "wait":
		<-ctx.Done()
		return out, status.FromContextError(ctx.Err()).Err()
	case v == "deadline":
		d, ok := ctx.Deadline()
		v = fmt.Sprintf("deadline %v, in (4s, 5s]: %v", ok, time.Until(d) > 4*time.Second && time.Until(d) <= 5*time.Second)
	}
	return proto.MarshalOptions{}.MarshalAppend(out, wrapperspb.String("echo: "+v))
}

// start serves c (Method and Handler default to echo) on a loopback
// port; the server is closed at the end of the test.
func start(t *testing.T, c Config) (*Server, string) {
	t.Helper()
	if c.Method == "" {
		c.Method, c.Handler = echoMethod, echo
	}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve = %v, want ErrServerClosed", err)
		}
	})
	return s, l.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func call(ctx context.Context, cc *grpc.ClientConn, v string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, echoMethod, wrapperspb.String(v), out, opts...)
	return out.Value, err
}

// grpc-go's client gets every answer right, many calls at once on one
// connection, small and large (over a frame, over the windows).
func TestGRPCClient(t *testing.T) {
	_, addr := start(t, Config{StreamWindow: 65535})
	cc := dial(t, addr)
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := fmt.Sprint(i)
			if i%50 == 0 {
				v = strings.Repeat("x", 200_000+i) // several frames and window updates both ways
			}
			got, err := call(t.Context(), cc, v)
			if err != nil || got != "echo: "+v {
				errs <- fmt.Errorf("call %d = %.40q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// An answer larger than the client's windows goes out as the client
// opens them: the data that filled a window is written out before the
// server waits for the next (it once sat unflushed, and a lone large
// call hung; grpc-go's fixed 64 KiB windows make it certain).
func TestLargeAnswerOverFixedWindows(t *testing.T) {
	_, addr := start(t, Config{StreamWindow: 65535})
	cc := dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v := strings.Repeat("y", 300_000)
	got, err := call(ctx, cc, v)
	if err != nil || got != "echo: "+v {
		t.Fatalf("a 300 KB call over 64 KiB windows = %.40q, %v", got, err)
	}
}

// What the server does not serve is answered with a status, and the
// connection serves on.
func TestRefusals(t *testing.T) {
	_, addr := start(t, Config{MaxRecvMsgSize: 1 << 10})
	cc := dial(t, addr)
	ctx := t.Context()
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	want(t, "health service", err, codes.Unimplemented, "unknown method /grpc.health.v1.Health/Check")
	_, err = call(ctx, cc, "zipped", grpc.UseCompressor(gzip.Name))
	want(t, "gzip", err, codes.Unimplemented, "compressed")
	_, err = call(ctx, cc, strings.Repeat("y", 2<<10))
	want(t, "too large", err, codes.ResourceExhausted, "larger than 1024")
	_, err = call(ctx, cc, "fail nö 100% \x01")
	want(t, "handler error", err, codes.InvalidArgument, "nö 100% \x01")
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = call(tctx, cc, "wait")
	want(t, "deadline", err, codes.DeadlineExceeded, "")
	if got, err := call(ctx, cc, "still there"); err != nil || got != "echo: still there" {
		t.Errorf("after the refusals: %q, %v", got, err)
	}
}

func want(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Errorf("%s: %v, want %v containing %q", what, err, code, msg)
	}
}

// The handler sees the client's deadline (grpc-timeout).
func TestDeadlineReachesHandler(t *testing.T) {
	_, addr := start(t, Config{})
	cc := dial(t, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got, err := call(ctx, cc, "deadline")
	if err != nil || got != "echo: deadline true, in (4s, 5s]: true" {
		t.Errorf("got %q, %v", got, err)
	}
}

// TLS with client certificates: the handler runs only for clients that
// Authorize admits; others get its status.
func TestMutualTLS(t *testing.T) {
	ca := certstest.NewCA(t, "test-ca")
	srvCert := ca.Localhost(t)
	tc := &tls.Config{Certificates: []tls.Certificate{srvCert.TLS(t)}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	authorize := func(cs *tls.ConnectionState) error {
		if cs == nil || len(cs.PeerCertificates) == 0 {
			return errors.New("no certificate")
		}
		if uris := cs.PeerCertificates[0].URIs; len(uris) == 0 || uris[0].String() != "spiffe://test/envoy" {
			return status.Error(codes.PermissionDenied, "not envoy")
		}
		return nil
	}
	_, addr := start(t, Config{TLS: tc, Authorize: authorize})
	client := func(uri string) *grpc.ClientConn {
		c := ca.Issue(t, certstest.Leaf{URIs: []string{uri}, Client: true})
		creds := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{c.TLS(t)}})
		return dial(t, addr, grpc.WithTransportCredentials(creds))
	}
	if got, err := call(t.Context(), client("spiffe://test/envoy"), "hi"); err != nil || got != "echo: hi" {
		t.Errorf("admitted client: %q, %v", got, err)
	}
	_, err := call(t.Context(), client("spiffe://test/other"), "hi")
	want(t, "other identity", err, codes.PermissionDenied, "not envoy")
	plain := dial(t, addr)
	if _, err := call(t.Context(), plain, "hi"); status.Code(err) != codes.Unavailable {
		t.Errorf("cleartext client on the TLS port: %v, want Unavailable", err)
	}
}

// Shutdown lets a call in flight finish, refuses new connections and
// returns once every connection is closed.
func TestShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := func(ctx context.Context, req, out []byte) ([]byte, error) {
		close(entered)
		<-release
		return echo(ctx, req, out)
	}
	s, addr := start(t, Config{Method: echoMethod, Handler: h})
	cc := dial(t, addr)
	res := make(chan error, 1)
	go func() {
		got, err := call(t.Context(), cc, "in flight")
		if err == nil && got != "echo: in flight" {
			err = fmt.Errorf("got %q", got)
		}
		res <- err
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(t.Context()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned %v with a call in flight", err)
	case <-time.After(100 * time.Millisecond): // Shutdown must still wait: nothing to observe but its not returning
	}
	close(release)
	if err := <-res; err != nil {
		t.Errorf("call in flight during Shutdown: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("a new connection was accepted after Shutdown")
	}
}

// Accept errors that pass (out of file descriptors) are waited out;
// others end Serve.
func TestTemporary(t *testing.T) {
	for err, want := range map[error]bool{
		&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}: true,
		syscall.ECONNABORTED: true,
		net.ErrClosed:        false,
		errors.New("other"):  false,
	} {
		if got := temporary(err); got != want {
			t.Errorf("temporary(%v) = %v, want %v", err, got, want)
		}
	}
}
