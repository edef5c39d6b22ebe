package h2rpc

import (
	"errors"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// pendingWriter is the Framer's writer: it appends a frame to pending
// (wmu held).
type pendingWriter struct{ c *conn }

func (w pendingWriter) Write(p []byte) (int, error) {
	c := w.c
	if c.werr != nil {
		return 0, c.werr
	}
	c.pending = append(c.pending, p...)
	c.frames++
	return len(p), nil
}

var errConnClosed = errors.New("h2rpc: connection closed")

// write runs fn, which writes frames, under wmu.
func (c *conn) write(fn func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(fn)
}

// writeLocked waits while pending holds maxPendingWrite bytes, runs fn
// and tells the flusher.
func (c *conn) writeLocked(fn func() error) error {
	for len(c.pending) >= maxPendingWrite && c.werr == nil {
		c.wcond.Wait()
	}
	if c.werr != nil {
		return c.werr
	}
	err := fn()
	c.flushLocked()
	return err
}

// flushLocked tells the flusher there is something to write.
func (c *conn) flushLocked() {
	if !c.flushing {
		c.flushing = true
		select {
		case c.flushc <- struct{}{}:
		default:
		}
	}
}

// flusher writes pending out: once told, it yields so that calls about
// to answer join the same write, then writes everything pending in one
// syscall.
func (c *conn) flusher() {
	for {
		select {
		case <-c.flushc:
		case <-c.done:
			return
		}
		runtime.Gosched()
		c.wmu.Lock()
		buf, frames := c.pending, c.frames
		c.pending, c.frames, c.flushing = c.spare[:0], 0, false
		c.spare = nil
		c.wcond.Broadcast()
		c.wmu.Unlock()
		var err error
		if len(buf) > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			_, err = c.nc.Write(buf)
			c.s.m.writes.Inc()
			c.s.m.frames.Add(float64(frames))
		}
		c.wmu.Lock()
		if cap(buf) <= 64<<10 {
			c.spare = buf[:0]
		}
		closing := c.drainClose && len(c.pending) == 0
		c.wcond.Broadcast()
		c.wmu.Unlock()
		if err != nil {
			c.close(err)
			return
		}
		if closing {
			c.finish()
		}
	}
}

// waitFlushed waits until pending is written (or the connection broke).
func (c *conn) waitFlushed() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for (len(c.pending) > 0 || c.flushing) && c.werr == nil {
		c.wcond.Wait()
	}
}

// finish ends a drained connection: our side is closed for writing, and
// the reader gets a second to see the client's last frames (so that the
// client reads our GOAWAY, not a reset).
func (c *conn) finish() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
		return
	}
	c.close(nil)
}

// close ends the connection at once (idempotent).
func (c *conn) close(err error) {
	c.once.Do(func() {
		c.cancel()
		_ = c.nc.Close()
		c.wmu.Lock()
		if err == nil {
			err = errConnClosed
		}
		if c.werr == nil {
			c.werr = err
		}
		c.wcond.Broadcast()
		c.wmu.Unlock()
		close(c.done)
	})
}

// goAway stops new calls (Shutdown): GOAWAY with the last stream seen;
// the connection closes once its calls are answered.
func (c *conn) goAway() {
	c.wmu.Lock()
	if c.fr == nil || c.werr != nil { // still in its handshake: close it
		c.wmu.Unlock()
		c.close(nil)
		return
	}
	c.goingAway = true
	_ = c.writeLocked(func() error { return c.fr.WriteGoAway(c.lastID, http2.ErrCodeNo, nil) })
	if len(c.streams) == 0 {
		c.drainClose = true
	}
	c.wmu.Unlock()
}

// keepalive runs every PingAfter: a connection that read no frame since
// the last look (idle for PingAfter to twice that) gets a PING, and is
// closed if no frame arrives within PingTimeout.
func (c *conn) keepalive() {
	cfg := c.s.cfg
	reads := c.reads.Load()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return
	}
	idle := reads == c.readsSeen
	c.readsSeen = reads
	switch {
	case c.pinging && idle:
		c.s.m.connErrors.WithLabelValues("keepalive_timeout").Inc()
		go c.close(errors.New("h2rpc: keepalive ping not answered"))
		return
	case idle:
		c.pinging = true
		_ = c.writeLocked(func() error { return c.fr.WritePing(false, [8]byte{'k', 'a'}) })
		c.keepaliveTmr.Reset(cfg.PingTimeout)
		return
	}
	c.pinging = false
	c.keepaliveTmr.Reset(cfg.PingAfter)
}

// resetStream sends RST_STREAM and forgets the stream (unless its call
// runs: then its answer is dropped).
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.lastID = max(c.lastID, id)
	if st := c.streams[id]; st != nil {
		st.reset = true
		if !st.running {
			c.dropLocked(st)
		}
	}
	_ = c.writeLocked(func() error { return c.fr.WriteRSTStream(id, code) })
}

// Header fields of responses.
var (
	hfStatus200   = hpack.HeaderField{Name: ":status", Value: "200"}
	hfContentType = hpack.HeaderField{Name: "content-type", Value: "application/grpc"}
	hfGRPCOK      = hpack.HeaderField{Name: "grpc-status", Value: "0"}
)

// writeResponseLocked writes a call's answer: HEADERS, DATA (within the
// send windows) and the trailers (wmu held). msg is length-prefixed.
func (c *conn) writeResponseLocked(st *stream, msg []byte) error {
	return c.writeLocked(func() error {
		c.hbuf.Reset()
		_ = c.henc.WriteField(hfStatus200)
		_ = c.henc.WriteField(hfContentType)
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		for len(msg) > 0 {
			for (c.sendConn <= 0 || st.sendWin <= 0) && !st.reset && c.werr == nil {
				// What is written so far goes out first: the client opens
				// its window only once it has read the data that filled it.
				c.flushLocked()
				c.wcond.Wait()
			}
			if st.reset || c.werr != nil {
				return c.werr
			}
			n := int(min(int64(len(msg)), c.sendConn, st.sendWin, int64(c.peerFrame)))
			if err := c.fr.WriteData(st.id, false, msg[:n]); err != nil {
				return err
			}
			msg, c.sendConn, st.sendWin = msg[n:], c.sendConn-int64(n), st.sendWin-int64(n)
		}
		c.hbuf.Reset()
		_ = c.henc.WriteField(hfGRPCOK)
		return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: true})
	})
}

// writeStatusLocked answers a call with a status and no message (a
// trailers-only response); a stream the client has not finished sending
// is then reset with NO_ERROR (RFC 9113 §8.1). wmu held.
func (c *conn) writeStatusLocked(st *stream, code codes.Code, msg string) error {
	return c.writeLocked(func() error {
		c.hbuf.Reset()
		_ = c.henc.WriteField(hfStatus200)
		_ = c.henc.WriteField(hfContentType)
		_ = c.henc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(int(code))})
		if msg != "" {
			_ = c.henc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: encodeMessage(msg)})
		}
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
			return err
		}
		if !st.remoteEnd {
			return c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		}
		return nil
	})
}

// encodeMessage percent-encodes msg as gRPC asks of grpc-message (bytes
// outside printable ASCII, and '%'), cut to 1 KiB first.
func encodeMessage(msg string) string {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(msg))
	for i := 0; i < len(msg); i++ {
		if ch := msg[i]; ch >= ' ' && ch <= '~' && ch != '%' {
			b = append(b, ch)
		} else {
			b = append(b, '%', hex[ch>>4], hex[ch&15])
		}
	}
	return string(b)
}
