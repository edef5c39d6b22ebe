package h2rpc

import (
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
)

// headerBlock decodes the header block of a HEADERS frame and its
// CONTINUATIONs as they arrive, keeping only what a call needs: no field
// is stored, so a block of indexed fields (every call after a client's
// first) costs no allocation. The serve goroutine owns it.
type headerBlock struct {
	dec    *hpack.Decoder
	method string // Config.Method
	limit  uint32 // Config.MaxHeaderListSize

	id      uint32 // stream of the block being read; 0: none
	ended   bool   // END_STREAM on its HEADERS
	wire    int    // encoded bytes so far
	size    uint32 // header list size so far (RFC 9113 §6.5.2)
	post    bool   // :method POST
	grpc    bool   // content-type application/grpc[+proto][;...]
	pathOK  bool   // :path is method
	path    string // :path otherwise (bounded by limit)
	timeout time.Duration
	badTime string // a malformed grpc-timeout
}

func newHeaderBlock(method string, limit uint32) *headerBlock {
	h := &headerBlock{method: method, limit: limit}
	h.dec = hpack.NewDecoder(4096, h.emit)
	h.dec.SetMaxStringLength(int(limit))
	return h
}

func (h *headerBlock) emit(f hpack.HeaderField) {
	if h.size += uint32(len(f.Name) + len(f.Value) + 32); h.size > h.limit {
		return
	}
	switch f.Name {
	case ":method":
		h.post = f.Value == "POST"
	case ":path":
		h.pathOK = f.Value == h.method
		if !h.pathOK {
			h.path = f.Value
		}
	case "content-type":
		h.grpc = isGRPC(f.Value)
	case "grpc-timeout":
		d, ok := parseTimeout(f.Value)
		if !ok {
			h.badTime = f.Value
		}
		h.timeout = d
	}
}

// fragment decodes the next fragment of the block of stream id (first:
// from its HEADERS frame); done is true at END_HEADERS. A block longer
// than twice the header list bound (plus a frame) is a connection error,
// so CONTINUATION frames cannot go on forever.
func (h *headerBlock) fragment(id uint32, frag []byte, first, ended, last bool) (done bool, err error) {
	if first {
		*h = headerBlock{dec: h.dec, method: h.method, limit: h.limit, id: id, ended: ended}
	}
	if h.wire += len(frag); h.wire > 2*int(h.limit)+16<<10 {
		return false, http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	if _, err := h.dec.Write(frag); err != nil {
		return false, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if !last {
		return false, nil
	}
	if err := h.dec.Close(); err != nil {
		return false, http2.ConnectionError(http2.ErrCodeCompression)
	}
	return true, nil
}

// head is what the block says of the call.
func (h *headerBlock) head() callHead {
	switch {
	case h.size > h.limit:
		return callHead{code: codes.ResourceExhausted, reason: reasonTooLarge, msg: "header list too large"}
	case h.badTime != "":
		return callHead{code: codes.Internal, reason: reasonMalformed, msg: "malformed grpc-timeout " + strconv.Quote(h.badTime)}
	case !h.post || !h.grpc:
		return callHead{code: codes.Internal, reason: reasonMalformed, msg: "not a gRPC call (POST, content-type application/grpc)"}
	case !h.pathOK:
		return callHead{code: codes.Unimplemented, reason: reasonUnimplemented, msg: "unknown method " + h.path}
	}
	return callHead{timeout: h.timeout}
}

func isGRPC(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest == "+proto" || rest[0] == ';')
}
