// Package h2rpc owns a lean server of unary gRPC calls over HTTP/2 for
// one method with small messages: the rate-limit service's
// ShouldRateLimit behind ratelimit.server lean. It reads frames with
// golang.org/x/net/http2's Framer (frame parsing, HPACK, CONTINUATION,
// header list bounds) on one goroutine per connection, runs each
// complete call on its own goroutine, and writes the frames of all
// calls of a connection through one buffer that a flusher writes out
// after letting the calls about to answer join it (one syscall for many
// responses).
//
// What it serves: cleartext HTTP/2 with prior knowledge (h2c) or TLS
// (ALPN h2), unary calls of Config.Method with identity encoding,
// grpc-timeout deadlines, flow control both ways (receive windows are
// granted back as data arrives: what a connection buffers is bounded by
// the message and connection bounds below, not the windows), PING, SETTINGS,
// RST_STREAM, GOAWAY (and a graceful Shutdown), keepalive pings on idle
// connections. What it does not: any other method (server reflection,
// the health service: UNIMPLEMENTED), compressed messages
// (UNIMPLEMENTED), streaming, HTTP/1 (the connection is closed), server
// push.
//
// Bounds: Config.MaxStreams calls per connection (more are refused with
// REFUSED_STREAM; a reset call counts until its handler returns),
// Config.MaxRecvMsgSize per message, the same again of request bytes
// buffered per connection (a call that would pass it gets
// RESOURCE_EXHAUSTED), MaxBufferedBytes of request bytes over all
// connections (likewise), MaxHeaderListSize of headers, maxPendingWrite
// bytes of unwritten responses per connection (callers wait), and
// writeTimeout for a write (then the connection is closed).
//
// h2rpc must not import anything else in this module.
package h2rpc
