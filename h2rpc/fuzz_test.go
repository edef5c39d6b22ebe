package h2rpc

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// seedFrames are frames a client sends after its preface and SETTINGS:
// a call, a ping, a window update, a reset.
func seedFrames(t testing.TB) []byte {
	var out, hb bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", echoMethod}, {"content-type", "application/grpc"}, {"grpc-timeout", "1S"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	b, _ := proto.Marshal(wrapperspb.String("fuzz"))
	msg := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
	for _, err := range []error{
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}),
		fr.WriteData(1, true, msg),
		fr.WritePing(false, [8]byte{1}),
		fr.WriteWindowUpdate(0, 1000),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndHeaders: true}),
		fr.WriteRSTStream(3, http2.ErrCodeCancel),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// Whatever a client sends after its preface, a connection neither panics
// nor hangs: it ends when the client goes away.
func FuzzConn(f *testing.F) {
	f.Add(seedFrames(f))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})
	s, err := New(Config{Method: echoMethod, Handler: echo, MaxRecvMsgSize: 64 << 10, PingAfter: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	var settings bytes.Buffer
	_ = http2.NewFramer(&settings, nil).WriteSettings()
	f.Fuzz(func(t *testing.T, frames []byte) {
		client, server := net.Pipe()
		drained := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, client); close(drained) }()
		c := newConn(s, server)
		served := make(chan struct{})
		go func() { c.serve(); close(served) }()
		_, _ = client.Write(append(append([]byte(http2.ClientPreface), settings.Bytes()...), frames...))
		client.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatalf("connection still served 10 s after the client left; frames % x", frames)
		}
		<-drained
	})
}
