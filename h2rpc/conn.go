package h2rpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is one client connection. Its serve goroutine reads frames; calls
// run on their own goroutines; every frame is written under wmu into
// pending, which the flush goroutine writes out.
type conn struct {
	s      *Server
	nc     net.Conn
	tls    *tls.ConnectionState // after the handshake; nil without TLS
	ctx    context.Context      // of every call; canceled when the connection ends
	cancel context.CancelFunc
	fr     *http2.Framer // reads: serve goroutine; writes: under wmu
	done   chan struct{} // closed by close
	once   sync.Once

	reads atomic.Uint64 // frames read (keepalive sees whether it moved)

	wmu        sync.Mutex
	wcond      *sync.Cond // pending drained, a window grew, or the connection broke
	pending    []byte     // frames not written yet
	spare      []byte     // the other buffer, while the flusher writes one
	frames     int        // frames in pending
	flushing   bool       // the flusher is told
	flushc     chan struct{}
	werr       error // set when the connection is broken
	henc       *hpack.Encoder
	hbuf       bytes.Buffer
	streams    map[uint32]*stream // open and running calls
	lastID     uint32             // highest client stream id seen
	buffered   int                // request bytes held by streams
	sendConn   int64              // connection send window
	peerWindow int64              // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	peerFrame  uint32             // the peer's SETTINGS_MAX_FRAME_SIZE
	goingAway  bool               // GOAWAY sent: no new calls
	drainClose bool               // close once pending is written
	pinging    bool               // our keepalive PING is outstanding
	readsSeen  uint64             // reads at the keepalive's last look

	// serve goroutine only
	hdr          *headerBlock
	recvConn     int64  // connection receive window left
	recvUnacked  uint32 // connection bytes received and not yet granted back
	keepaliveTmr *time.Timer
}

// stream is one call.
type stream struct {
	c         *conn
	id        uint32
	buf       *[]byte // request bytes so far, prefix included (pooled)
	timeout   time.Duration
	sendWin   int64 // under wmu
	recvWin   int64 // serve goroutine
	unacked   uint32
	running   bool // the message is complete and its call runs
	reset     bool // the client reset it: its answer is dropped (under wmu)
	remoteEnd bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, done: make(chan struct{}), flushc: make(chan struct{}, 1),
		streams: map[uint32]*stream{}, sendConn: 65535, peerWindow: 65535, peerFrame: 16384,
		recvConn: int64(s.connWindow())}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wcond = sync.NewCond(&c.wmu)
	c.henc = hpack.NewEncoder(&c.hbuf)
	return c
}

// connWindow is the connection's receive window: 4 stream windows.
func (s *Server) connWindow() uint32 { return min(4*s.cfg.StreamWindow, 1<<31-1) }

// budget is the most request bytes a connection buffers.
func (s *Server) budget() int { return 2 * (s.cfg.MaxRecvMsgSize + 5) }

// reserve counts n more request bytes against the server-wide bound
// (MaxBufferedBytes), or reports false and counts nothing.
func (s *Server) reserve(n int) bool {
	if s.buffered.Add(int64(n)) > s.cfg.MaxBufferedBytes {
		s.buffered.Add(-int64(n))
		return false
	}
	return true
}

// serve runs the connection until it ends.
func (c *conn) serve() {
	var err error
	defer func() {
		c.close(err)
		c.s.track(c, false)
	}()
	br, err := c.handshake()
	if err != nil {
		return
	}
	c.wmu.Lock()
	if c.werr != nil { // closed meanwhile (Shutdown)
		c.wmu.Unlock()
		return
	}
	c.fr = http2.NewFramer(pendingWriter{c}, br)
	c.hdr = newHeaderBlock(c.s.cfg.Method, c.s.cfg.MaxHeaderListSize)
	c.fr.SetMaxReadFrameSize(16384)
	c.fr.SetReuseFrames()
	_ = c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.s.cfg.MaxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: c.s.cfg.StreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.s.cfg.MaxHeaderListSize})
	_ = c.fr.WriteWindowUpdate(0, c.s.connWindow()-65535)
	c.flushLocked()
	c.keepaliveTmr = time.AfterFunc(c.s.cfg.PingAfter, c.keepalive)
	c.wmu.Unlock()
	go c.flusher()
	defer c.keepaliveTmr.Stop()
	err = c.readLoop()
}

// handshake does TLS (ALPN h2) and reads the client preface, within
// handshakeTimeout.
func (c *conn) handshake() (*bufio.Reader, error) {
	_ = c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	if c.s.cfg.TLS != nil {
		tc := tls.Server(c.nc, c.s.cfg.TLS)
		if err := tc.HandshakeContext(c.ctx); err != nil {
			return nil, err
		}
		cs := tc.ConnectionState()
		if p := cs.NegotiatedProtocol; p != "" && p != "h2" {
			return nil, errors.New("h2rpc: ALPN protocol is not h2")
		}
		c.tls, c.nc = &cs, tc
	}
	br := bufio.NewReaderSize(c.nc, 16<<10)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, preface); err != nil {
		return nil, err
	}
	if string(preface) != http2.ClientPreface {
		return nil, errors.New("h2rpc: not an HTTP/2 client preface")
	}
	_ = c.nc.SetDeadline(time.Time{})
	return br, nil
}

// readLoop reads and handles frames until the connection fails or a
// connection error; the first frame must be SETTINGS.
func (c *conn) readLoop() error {
	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code)
				continue
			}
			return c.connError(err)
		}
		c.reads.Add(1)
		if _, ok := f.(*http2.SettingsFrame); first && !ok {
			return c.connError(http2.ConnectionError(http2.ErrCodeProtocol))
		}
		first = false
		if err := c.handle(f); err != nil {
			return c.connError(err)
		}
	}
}

// handle handles one frame; an error is a connection error.
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return c.onHeaderFragment(f.StreamID, f.HeaderBlockFragment(), true, f.StreamEnded(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		return c.onHeaderFragment(f.StreamID, f.HeaderBlockFragment(), false, false, f.HeadersEnded())
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			c.wmu.Lock()
			c.pinging = false
			c.wmu.Unlock()
			return nil
		}
		return c.write(func() error { return c.fr.WritePing(true, f.Data) })
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f.StreamID)
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case *http2.GoAwayFrame:
		c.wmu.Lock()
		c.goingAway = true
		c.wmu.Unlock()
	}
	return nil // PRIORITY, unknown frames
}

func (c *conn) onHeaderFragment(id uint32, frag []byte, first, ended, last bool) error {
	done, err := c.hdr.fragment(id, frag, first, ended, last)
	if err != nil || !done {
		return err
	}
	return c.onHeaders(c.hdr)
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerWindow
			c.peerWindow = int64(s.Val)
			for _, st := range c.streams {
				if st.sendWin += delta; st.sendWin > 1<<31-1 {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		case http2.SettingMaxFrameSize:
			c.peerFrame = s.Val
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.wcond.Broadcast()
	return c.writeLocked(c.fr.WriteSettingsAck)
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if c.sendConn += inc; c.sendConn > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
	} else if st := c.streams[f.StreamID]; st != nil {
		if st.sendWin += inc; st.sendWin > 1<<31-1 {
			c.dropLocked(st)
			return c.writeLocked(func() error { return c.fr.WriteRSTStream(f.StreamID, http2.ErrCodeFlowControl) })
		}
	} else if f.StreamID > c.lastID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.wcond.Broadcast()
	return nil
}

// onReset drops a stream the client reset; a running call finishes, its
// answer unsent.
func (c *conn) onReset(id uint32) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if id > c.lastID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st := c.streams[id]; st != nil {
		st.reset = true
		if !st.running {
			c.dropLocked(st)
		}
		c.wcond.Broadcast()
	}
	return nil
}

// dropLocked forgets st and frees its buffer (wmu held); while its call
// runs, it only drops its answer (the call drops st when it returns).
func (c *conn) dropLocked(st *stream) {
	if st.running {
		st.reset = true
		return
	}
	if c.streams[st.id] != st {
		return
	}
	delete(c.streams, st.id)
	if st.buf != nil {
		c.buffered -= len(*st.buf)
		c.s.buffered.Add(-int64(len(*st.buf)))
		putBuf(st.buf)
		st.buf = nil
	}
	if c.goingAway && len(c.streams) == 0 {
		c.drainClose = true
		c.flushLocked()
	}
}

// connError sends GOAWAY for an HTTP/2 connection error; it returns err.
func (c *conn) connError(err error) error {
	var ce http2.ConnectionError
	code := "io"
	if errors.As(err, &ce) {
		code = http2.ErrCode(ce).String()
		c.wmu.Lock()
		_ = c.writeLocked(func() error { return c.fr.WriteGoAway(c.lastID, http2.ErrCode(ce), nil) })
		c.drainClose = true
		c.wmu.Unlock()
		c.waitFlushed()
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.s.m.connErrors.WithLabelValues(code).Inc()
		c.s.cfg.Logger.Debug("connection ended by an error", "remote", c.nc.RemoteAddr().String(), "code", code, "error", err)
	}
	return err
}
