package ha

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/drain"
	"github.com/xds-server/xds-server/internal/logclip"
)

// Bounds of what is read from the drains folder: anyone who can write the
// KV under the prefix can write there, so nothing read is trusted beyond
// them.
const (
	// MaxKVNameBytes bounds a service, endpoint or node name read from KV.
	MaxKVNameBytes = 1024
	// maxDrainValue bounds an admin drain's value in bytes.
	maxDrainValue = 4 << 10
	// maxDepartedValue bounds a departure's value in bytes (the endpoint
	// as last registered, with its meta and tags).
	maxDepartedValue = 64 << 10
	// maxKeyBytes bounds a key of the drains folder beyond the prefix: a
	// longer one cannot hold names within MaxKVNameBytes (escaped: at most
	// 3 bytes each).
	maxKeyBytes = 2*3*MaxKVNameBytes + 64
	// maxAddressBytes bounds a departed endpoint's address (a DNS name).
	maxAddressBytes = 253
)

// Log limits of the entries skipped: at most badLogLines lines per
// badLogEvery, each with its names clipped to logNameBytes.
const (
	badLogLines  = 5
	badLogEvery  = 10 * time.Second
	logNameBytes = 256
	// badRemembered bounds the skipped entries remembered (so each is
	// counted and logged once per version).
	badRemembered = 10000
)

// checkName reports a name that is empty or too long, without quoting it.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is empty", what)
	case len(name) > MaxKVNameBytes:
		return fmt.Errorf("%s is %d bytes, more than %d", what, len(name), MaxKVNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	return nil
}

// checkEndpoint validates a departed endpoint as read from KV; its drain
// reasons are kept only when they are drain sources.
func checkEndpoint(d *drain.Departed) error {
	ep := &d.Endpoint
	if err := errors.Join(checkName("service", d.Service), checkName("endpoint id", ep.ID)); err != nil {
		return err
	}
	if len(ep.Node) > MaxKVNameBytes {
		return fmt.Errorf("node is %d bytes, more than %d", len(ep.Node), MaxKVNameBytes)
	}
	if ep.Port < 1 || ep.Port > 65535 {
		return fmt.Errorf("port %d not in [1, 65535]", ep.Port)
	}
	if !validAddress(ep.Address) {
		return errors.New("address is not an IP address or a DNS name")
	}
	var why []string
	for _, w := range strings.Split(ep.Drain, ",") {
		for _, src := range drain.Sources {
			if w == src {
				why = append(why, w)
			}
		}
	}
	ep.Drain = strings.Join(why, ",")
	return nil
}

// validAddress reports whether a is an IP address or a DNS name.
func validAddress(a string) bool {
	if a == "" || len(a) > maxAddressBytes {
		return false
	}
	if net.ParseIP(a) != nil {
		return true
	}
	for _, label := range strings.Split(strings.TrimSuffix(a, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// badEntries counts and logs the entries of a folder that are skipped:
// each version of an entry (key, ModifyIndex) once, at most badLogLines
// lines per badLogEvery, names clipped. Not safe for concurrent use (one
// watch reads the folder).
type badEntries struct {
	log    *slog.Logger
	errors *prometheus.CounterVec
	now    func() time.Time

	prev, next map[string]uint64 // the skipped entries of the last read, and of this one
	since      time.Time         // start of the current log period
	lines      int               // lines logged in it
	suppressed int               // lines not logged since the last line
}

// begin starts a read of the folder.
func (b *badEntries) begin() {
	if b.next != nil {
		b.prev = b.next
	}
	b.next = map[string]uint64{}
}

// skip counts and logs the skipped entry p (op: the metric's op label).
func (b *badEntries) skip(op string, p *api.KVPair, err error) {
	if b.next == nil {
		b.begin()
	}
	if len(b.next) < badRemembered {
		b.next[p.Key] = p.ModifyIndex
	}
	if idx, ok := b.prev[p.Key]; ok && idx == p.ModifyIndex {
		return // counted and logged when first read
	}
	b.errors.WithLabelValues(op).Inc()
	now := b.now()
	if now.Sub(b.since) >= badLogEvery {
		b.since, b.lines = now, 0
	}
	if b.lines >= badLogLines {
		b.suppressed++
		return
	}
	b.lines++
	b.log.Warn("ignoring an entry in Consul KV", "op", op, "key", logclip.To(p.Key, logNameBytes), "bytes", len(p.Value),
		"error", logclip.To(err.Error(), logNameBytes), "suppressed", b.suppressed)
	b.suppressed = 0
}
