package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Conn is a minimal gRPC client for unary calls of small messages over
// one cleartext HTTP/2 connection: a request is one HEADERS frame and one
// DATA frame. The headers are the same on every request: the first block
// adds them to the HPACK dynamic table, as Envoy's and grpc-go's clients
// do, and every later block is the same few bytes of references to them,
// so the server decodes no literals. Callers append their frames to a
// buffer under a lock; a flusher goroutine writes it out, after yielding
// once so that callers about to write join the same syscall (what
// grpc-go's writer does, and Envoy's, which writes once per event-loop
// pass). One reader goroutine reads the responses and hands each to its
// caller. It does what a load generator needs and
// little else (no retries, no compression, no deadlines), so it spends a
// fraction of grpc-go's CPU per call, CPU the server under test shares on
// a small machine.
type h2Conn struct {
	nc     net.Conn
	first  []byte // the first request's header block: literals, indexed
	steady []byte // every later one's: references to the dynamic table

	wmu     sync.Mutex // guards the writer, nextID, sendWin and pending
	bw      *bufio.Writer
	fw      *http2.Framer
	nextID  uint32 // of the next stream; 1 until the first request
	sendWin int64  // connection-level send window, bytes
	winCond *sync.Cond
	pending bool          // frames are buffered and the flusher is told
	flushc  chan struct{} // tells the flusher (buffered: one signal)

	mu      sync.Mutex // guards calls and err
	calls   map[uint32]*h2Call
	err     error         // set once the connection is broken
	dead    chan struct{} // closed then
	recvAcc uint32
}

// h2Call is one call in flight; a worker reuses its own.
type h2Call struct {
	data   []byte // the response's DATA payload (gRPC length-prefixed)
	status int    // grpc-status; -1 when absent
	msg    string // grpc-message
	err    error
	done   chan struct{}
}

const (
	h2InitialWindow = 1 << 30 // our receive windows (connection and stream), bytes
	h2DefaultWindow = 65535
)

// dialH2 connects to addr (cleartext, prior knowledge; through dialer
// unless nil, TCP otherwise) and starts reading.
func dialH2(ctx context.Context, addr, method string, dialer func(context.Context, string) (net.Conn, error)) (*h2Conn, error) {
	if dialer == nil {
		var d net.Dialer
		dialer = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	nc, err := dialer(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("rlsbench: dial %s: %w", addr, err)
	}
	c := &h2Conn{nc: nc, nextID: 1, sendWin: h2DefaultWindow, calls: map[uint32]*h2Call{}, flushc: make(chan struct{}, 1), dead: make(chan struct{})}
	c.winCond = sync.NewCond(&c.wmu)
	c.bw = bufio.NewWriterSize(nc, 32<<10)
	c.fw = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 64<<10))
	c.fw.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := range 2 {
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", addr},
			{"content-type", "application/grpc"}, {"te", "trailers"}, {"user-agent", "rlsbench"}} {
			if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
				nc.Close()
				return nil, fmt.Errorf("rlsbench: %w", err)
			}
		}
		if i == 0 {
			c.first = bytes.Clone(hb.Bytes())
		} else {
			c.steady = bytes.Clone(hb.Bytes())
		}
		hb.Reset()
	}
	if _, err := c.bw.WriteString(http2.ClientPreface); err == nil {
		err = c.fw.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2InitialWindow},
			http2.Setting{ID: http2.SettingEnablePush, Val: 0})
		if err == nil {
			err = c.fw.WriteWindowUpdate(0, h2InitialWindow-h2DefaultWindow)
		}
		if err == nil {
			err = c.bw.Flush()
		}
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("rlsbench: %s: %w", addr, err)
		}
	}
	go c.readLoop()
	go c.flushLoop()
	return c, nil
}

// flushLoop writes out what callers buffered, once per signal, until the
// connection breaks.
func (c *h2Conn) flushLoop() {
	for {
		select {
		case <-c.dead:
			return
		case <-c.flushc:
		}
		runtime.Gosched() // callers woken with us buffer their frames first
		c.wmu.Lock()
		c.pending = false
		err := c.bw.Flush()
		c.wmu.Unlock()
		if err != nil {
			c.fail(err)
			return
		}
	}
}

// buffered tells the flusher that frames wait; c.wmu is held.
func (c *h2Conn) buffered() {
	if !c.pending {
		c.pending = true
		c.flushc <- struct{}{}
	}
}

// Close closes the connection; calls in flight fail.
func (c *h2Conn) Close() error { return c.nc.Close() }

func newH2Call() *h2Call { return &h2Call{done: make(chan struct{}, 1)} }

// invoke sends msg (a protobuf message) and waits for the answer; the
// response message (without its gRPC prefix) is valid until the next
// invoke with call.
func (c *h2Conn) invoke(ctx context.Context, call *h2Call, msg []byte) ([]byte, error) {
	call.data, call.status, call.msg, call.err = call.data[:0], -1, "", nil
	var prefix [5]byte
	binary.BigEndian.PutUint32(prefix[1:], uint32(len(msg)))
	need := int64(len(msg) + len(prefix))

	c.wmu.Lock()
	for c.sendWin < need && c.broken() == nil {
		_ = c.bw.Flush() // what earlier callers left buffered may be what the server waits for
		c.winCond.Wait()
	}
	if err := c.broken(); err != nil {
		c.wmu.Unlock()
		return nil, err
	}
	id := c.nextID
	c.nextID += 2
	c.mu.Lock()
	c.calls[id] = call
	c.mu.Unlock()
	c.sendWin -= need
	block := c.steady
	if id == 1 { // blocks are decoded in the order sent: the first one fills the table
		block = c.first
	}
	err := c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: true})
	if err == nil {
		// One DATA frame: the prefix and the message (a copy into the
		// writer's buffer, which WriteData makes anyway).
		err = c.fw.WriteData(id, true, append(prefix[:], msg...))
	}
	if err == nil {
		c.buffered()
	}
	c.wmu.Unlock()
	if err != nil {
		c.fail(err)
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
	if call.err != nil {
		return nil, call.err
	}
	if call.status != 0 {
		return nil, fmt.Errorf("rlsbench: grpc-status %d: %s", call.status, call.msg)
	}
	if len(call.data) < 5 || call.data[0] != 0 || int(binary.BigEndian.Uint32(call.data[1:5])) != len(call.data)-5 {
		return nil, errors.New("rlsbench: response is not one uncompressed gRPC message")
	}
	return call.data[5:], nil
}

// broken returns the connection's error, if any.
func (c *h2Conn) broken() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// fail breaks the connection: every call in flight and every later one
// gets err.
func (c *h2Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("rlsbench: connection: %w", err)
		close(c.dead)
	}
	calls := c.calls
	c.calls = map[uint32]*h2Call{}
	c.mu.Unlock()
	for _, call := range calls {
		call.err = c.err
		call.done <- struct{}{}
	}
	c.nc.Close()
	c.wmu.Lock()
	c.winCond.Broadcast()
	c.wmu.Unlock()
}

// readLoop reads frames until the connection breaks.
func (c *h2Conn) readLoop() {
	for {
		f, err := c.fw.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		if err := c.handle(f); err != nil {
			c.fail(err)
			return
		}
	}
}

// write runs fn with the writer locked; the flusher writes it out.
func (c *h2Conn) write(fn func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := fn(); err != nil {
		return err
	}
	c.buffered()
	return nil
}

func (c *h2Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		return c.write(c.fw.WriteSettingsAck)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		return c.write(func() error { return c.fw.WritePing(true, f.Data) })
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.wmu.Lock()
			c.sendWin += int64(f.Increment)
			c.winCond.Broadcast()
			c.wmu.Unlock()
		}
		return nil
	case *http2.GoAwayFrame:
		return fmt.Errorf("GOAWAY %v", f.ErrCode)
	case *http2.DataFrame:
		if call := c.call(f.StreamID, false); call != nil {
			call.data = append(call.data, f.Data()...)
		}
		if f.StreamEnded() {
			c.finish(f.StreamID, errors.New("rlsbench: stream ended without trailers"))
		}
		c.recvAcc += f.Length
		if c.recvAcc >= 1<<20 { // give the connection window back
			n := c.recvAcc
			c.recvAcc = 0
			return c.write(func() error { return c.fw.WriteWindowUpdate(0, n) })
		}
	case *http2.MetaHeadersFrame:
		call := c.call(f.StreamID, false)
		if call != nil {
			if s := f.PseudoValue("status"); s != "" && s != "200" {
				c.finish(f.StreamID, fmt.Errorf("rlsbench: HTTP status %s", s))
				return nil
			}
			for _, hf := range f.RegularFields() {
				switch hf.Name {
				case "grpc-status":
					call.status, _ = strconv.Atoi(hf.Value)
				case "grpc-message":
					call.msg = hf.Value
				}
			}
		}
		if f.StreamEnded() {
			c.finish(f.StreamID, nil)
		}
	case *http2.RSTStreamFrame:
		c.finish(f.StreamID, fmt.Errorf("rlsbench: stream reset: %v", f.ErrCode))
	}
	return nil
}

// call returns the call of stream id (nil if none), removing it when
// remove.
func (c *h2Conn) call(id uint32, remove bool) *h2Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.calls[id]
	if remove {
		delete(c.calls, id)
	}
	return call
}

// finish completes the call of stream id, with err if not nil.
func (c *h2Conn) finish(id uint32, err error) {
	if call := c.call(id, true); call != nil {
		if err != nil {
			call.err = err
		}
		call.done <- struct{}{}
	}
}
