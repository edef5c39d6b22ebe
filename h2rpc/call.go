package h2rpc

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// bufs hold request and response messages; one that grew past 64 KiB is
// dropped rather than kept.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { b := bufs.Get().(*[]byte); *b = (*b)[:0]; return b }

func putBuf(b *[]byte) {
	if cap(*b) <= 64<<10 {
		bufs.Put(b)
	}
}

// callHead is what a call's headers say.
type callHead struct {
	code    codes.Code // OK, or the answer to give at once
	reason  string     // of a refusal
	msg     string
	timeout time.Duration
}

// parseTimeout parses grpc-timeout: 1 to 8 digits and a unit.
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

// onHeaders opens a call (or ends one: trailers from the client) once
// its header block h is decoded.
func (c *conn) onHeaders(h *headerBlock) error {
	id, ended := h.id, h.ended
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if id <= c.lastID {
		st := c.streams[id]
		if st == nil || st.remoteEnd || !ended {
			return c.writeLocked(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeStreamClosed) })
		}
		return c.endLocked(st) // trailers end the request
	}
	c.lastID = id
	m := c.s.m
	if c.goingAway || len(c.streams) >= int(c.s.cfg.MaxStreams) {
		reason := reasonStreams
		if c.goingAway {
			reason = reasonShutdown
		}
		m.refused.WithLabelValues(reason).Inc()
		return c.writeLocked(func() error { return c.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
	}
	head := h.head()
	st := &stream{c: c, id: id, timeout: head.timeout, sendWin: c.peerWindow, recvWin: int64(c.s.cfg.StreamWindow),
		remoteEnd: ended}
	if head.code != codes.OK {
		m.refused.WithLabelValues(head.reason).Inc()
		return c.writeStatusLocked(st, head.code, "h2rpc: "+head.msg)
	}
	st.buf = getBuf()
	c.streams[id] = st
	if st.remoteEnd {
		return c.dispatchLocked(st)
	}
	return nil
}

// onData adds request bytes to a call, within the flow-control windows
// and the bounds.
func (c *conn) onData(f *http2.DataFrame) error {
	n := f.Length
	if c.recvConn -= int64(n); c.recvConn < 0 {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.recvUnacked += n; c.recvUnacked >= c.s.connWindow()/2 {
		inc := c.recvUnacked
		c.recvConn += int64(inc)
		c.recvUnacked = 0
		if err := c.writeLocked(func() error { return c.fr.WriteWindowUpdate(0, inc) }); err != nil {
			return err
		}
	}
	st := c.streams[f.StreamID]
	switch {
	case st == nil && f.StreamID > c.lastID:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	case st == nil: // answered or reset already
		return nil
	case st.remoteEnd:
		c.dropLocked(st)
		return c.writeLocked(func() error { return c.fr.WriteRSTStream(st.id, http2.ErrCodeStreamClosed) })
	}
	if st.recvWin -= int64(n); st.recvWin < 0 {
		c.dropLocked(st)
		return c.writeLocked(func() error { return c.fr.WriteRSTStream(st.id, http2.ErrCodeFlowControl) })
	}
	data := f.Data()
	if len(*st.buf)+len(data) > 5+c.s.cfg.MaxRecvMsgSize || c.buffered+len(data) > c.s.budget() || !c.s.reserve(len(data)) {
		c.s.m.refused.WithLabelValues(reasonTooLarge).Inc()
		c.dropLocked(st)
		st.remoteEnd = f.StreamEnded()
		return c.writeStatusLocked(st, codes.ResourceExhausted, "h2rpc: request message larger than "+strconv.Itoa(c.s.cfg.MaxRecvMsgSize)+" bytes or than the connection or server buffers")
	}
	*st.buf = append(*st.buf, data...)
	c.buffered += len(data)
	if f.StreamEnded() {
		return c.endLocked(st)
	}
	if st.unacked += n; st.unacked >= c.s.cfg.StreamWindow/2 {
		inc := st.unacked
		st.recvWin += int64(inc)
		st.unacked = 0
		return c.writeLocked(func() error { return c.fr.WriteWindowUpdate(st.id, inc) })
	}
	return nil
}

// endLocked ends the request of st: the call runs, or is answered at
// once when its message is missing, compressed or malformed.
func (c *conn) endLocked(st *stream) error {
	st.remoteEnd = true
	return c.dispatchLocked(st)
}

func (c *conn) dispatchLocked(st *stream) error {
	b := *st.buf
	code, reason, msg := codes.OK, "", ""
	switch {
	case len(b) < 5:
		code, reason, msg = codes.Internal, reasonMalformed, "the request carried no message"
	case b[0] == 1:
		code, reason, msg = codes.Unimplemented, reasonCompressed, "compressed messages are not supported (grpc-encoding identity only)"
	case b[0] != 0 || int(binary.BigEndian.Uint32(b[1:5])) != len(b)-5:
		code, reason, msg = codes.Internal, reasonMalformed, "the request is not exactly one length-prefixed message"
	}
	if code != codes.OK {
		c.s.m.refused.WithLabelValues(reason).Inc()
		c.dropLocked(st)
		return c.writeStatusLocked(st, code, "h2rpc: "+msg)
	}
	st.running = true
	c.s.m.active.Inc()
	select {
	case c.s.work <- st: // an idle worker takes it
	default:
		go c.run(st)
	}
	return nil
}

// run runs a call's handler and answers.
func (c *conn) run(st *stream) {
	ctx := c.ctx
	if st.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, st.timeout)
		defer cancel()
	}
	out := getBuf()
	*out = append(*out, 0, 0, 0, 0, 0)
	var err error
	if a := c.s.cfg.Authorize; a != nil {
		if err = a(c.tls); err != nil {
			c.s.m.refused.WithLabelValues(reasonUnauthorized).Inc()
			if _, ok := status.FromError(err); !ok {
				err = status.Error(codes.PermissionDenied, err.Error())
			}
		}
	}
	if err == nil {
		*out, err = c.s.cfg.Handler(ctx, (*st.buf)[5:], *out)
	}
	c.s.m.active.Dec()
	c.wmu.Lock()
	st.running = false
	if !st.reset {
		if err != nil {
			s, _ := status.FromError(err)
			_ = c.writeStatusLocked(st, s.Code(), s.Message())
		} else {
			binary.BigEndian.PutUint32((*out)[1:5], uint32(len(*out)-5))
			_ = c.writeResponseLocked(st, *out)
		}
	}
	c.dropLocked(st)
	c.wmu.Unlock()
	putBuf(out)
}
