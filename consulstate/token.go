package consulstate

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	"github.com/xds-server/xds-server/certs"
)

// tokenHeader carries Consul's ACL token.
const tokenHeader = "X-Consul-Token"

// tokenTransport keeps a rotated Consul token file in use without a
// restart. Consul's API client reads its token file once, when the client
// is made; with tokens that an agent (Vault, consul-template) rewrites
// every few hours, a long-running server would go on sending the revoked
// one and lose its catalog. Each request that carries the token read at
// start carries the file's current content instead (read again when the
// file changes, at most once per certs.DefaultCheckEvery; an unreadable
// or empty file keeps the last token). A request with a token of its own
// keeps it. The token is never logged.
type tokenTransport struct {
	base  http.RoundTripper
	file  *certs.File
	start string // the token the client read at start
}

// RoundTrip implements http.RoundTripper.
func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	cur := bytes.TrimSpace(t.file.Bytes())
	if len(cur) == 0 || req.Header.Get(tokenHeader) != t.start || string(cur) == t.start {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context()) // a RoundTripper must not modify its request
	r.Header.Set(tokenHeader, string(cur))
	return t.base.RoundTrip(r)
}

// followTokenFile makes hc send the current content of path wherever it
// would send start, the token read from it when the client was made.
func followTokenFile(hc *http.Client, path, start string, every time.Duration, now func() time.Time) error {
	f, err := certs.NewFile(path, every, now)
	if err != nil {
		return fmt.Errorf("consulstate: consul token file: %w", err)
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &tokenTransport{base: base, file: f, start: start}
	return nil
}
