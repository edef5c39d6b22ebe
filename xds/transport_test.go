package xds_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/xds-server/xds-server/e2e/harness"
	"github.com/xds-server/xds-server/xds"
)

// frameTap is a client connection that parses what the server writes to
// it as HTTP/2 frames and counts the server's own pings (not ping ACKs).
type frameTap struct {
	net.Conn
	w     *io.PipeWriter
	pings atomic.Int64
	done  chan struct{}
}

func tap(c net.Conn) *frameTap {
	r, w := io.Pipe()
	t := &frameTap{Conn: c, w: w, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		fr := http2.NewFramer(nil, r)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				_ = r.CloseWithError(err) // the client's reads go on untapped
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				t.pings.Add(1)
			}
		}
	}()
	return t
}

func (t *frameTap) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		_, _ = t.w.Write(b[:n]) // fails once the framer stopped: the count is then final
	}
	return n, err
}

func (t *frameTap) Close() error {
	_ = t.w.Close()
	return t.Conn.Close()
}

// TestACKsCostTheServerNoPings: a node ACKs every response, and each ACK
// is an HTTP/2 DATA frame; with grpc-go's dynamic flow control (BDP
// estimation) the server answered each of them with a PING (and a window
// update), and read the PING's ACK: four syscalls per node per change
// instead of two, on both sides. The server's windows are static.
func TestACKsCostTheServerNoPings(t *testing.T) {
	var tapped atomic.Pointer[frameTap]
	f := startWith(t, xds.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			ft := tap(c)
			tapped.Store(ft)
			return ft, nil
		}))
	c := f.client(t, harness.ADSConfig{NodeID: "n1", Cluster: "c"})
	f.srv.Update(testWorld(2, 3))
	firstOfEach(t, c, allTypes)
	for i := range 10 {
		w := testWorld(2, 3)
		w.Services[0].Endpoints[i%3].Port += 1000 * (i + 1)
		f.srv.Update(w)
		next(t, c, resource.EndpointType) // ACKed by the harness at once
	}
	_ = c.Close()
	f.conn.Close() // ends the tap: every frame the server wrote is counted
	ft := tapped.Load()
	<-ft.done
	if n := ft.pings.Load(); n != 0 {
		t.Errorf("the server sent %d pings over 14 ACKed responses, want none", n)
	}
}
