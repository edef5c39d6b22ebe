package ha

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/xds-server/xds-server/drain"
)

// ErrInvalid is wrapped by Config.Validate.
var ErrInvalid = errors.New("ha: invalid config")

// Config is what every HA part shares (the ha: section).
type Config struct {
	Prefix          string        // KV prefix of every shared key; ends with "/"
	PublishInterval time.Duration // at most one load summary per replica per this; > 0
	LeaderLockDelay time.Duration // Consul lock-delay of the weights leader's session, in [0, 1m]
	AliveTTL        time.Duration // TTL of the replica's alive check (AliveConfig.TTL), in [MinAliveTTL, MaxAliveTTL]; 0: DefaultAliveTTL
	Replica         string        // this replica's id; "" = NewReplicaID()
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.Prefix == "" || strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") {
		errs = append(errs, fmt.Errorf("%w: prefix %q must be non-empty, not start with / and end with /", ErrInvalid, c.Prefix))
	}
	if c.PublishInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: publish interval %v must be positive", ErrInvalid, c.PublishInterval))
	}
	if c.LeaderLockDelay < 0 || c.LeaderLockDelay > time.Minute {
		errs = append(errs, fmt.Errorf("%w: leader lock delay %v not in [0s, 1m]", ErrInvalid, c.LeaderLockDelay))
	}
	if c.AliveTTL != 0 && (c.AliveTTL < MinAliveTTL || c.AliveTTL > MaxAliveTTL) {
		errs = append(errs, fmt.Errorf("%w: alive ttl %v not in [%v, %v]", ErrInvalid, c.AliveTTL, MinAliveTTL, MaxAliveTTL))
	}
	return errors.Join(errs...)
}

// NewReplicaID returns an id for this process, unique among replicas and
// stable for its life: hostname, pid and a random suffix (a restarted
// replica is a new replica).
func NewReplicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Layout names the keys under a prefix (see doc.go).
type Layout struct {
	Prefix string // ends with "/"
}

// Drains is the folder of the admin drains.
func (l Layout) Drains() string { return l.Prefix + "drains/" }

// Drain is the key of the admin drain of t.
func (l Layout) Drain(t drain.Target) string {
	switch {
	case t.Node != "":
		return l.Drains() + "node/" + segment(t.Node)
	case t.Endpoint != "":
		return l.Drains() + "endpoint/" + segment(t.Service) + "/" + segment(t.Endpoint)
	default:
		return l.Drains() + "service/" + segment(t.Service)
	}
}

// segment escapes a name into one key segment: url.PathEscape, and the
// dot segments "." and ".." (which an HTTP path could resolve) escaped
// too.
func segment(name string) string {
	e := url.PathEscape(name)
	if e == "." || e == ".." {
		return strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

// Weights is the folder of the weights exchange (one watch reads it all).
func (l Layout) Weights() string { return l.Prefix + "weights/" }

// Summaries is the folder of the replicas' load summaries.
func (l Layout) Summaries() string { return l.Weights() + "summaries/" }

// Summary is the key of replica's load summary. The id is used as it is,
// not escaped: a replica id has no "/" (NewWeights refuses one), and the
// key names the replica to every reader.
func (l Layout) Summary(replica string) string { return l.Summaries() + replica }

// Table is the key of the weights leader's table.
func (l Layout) Table() string { return l.Weights() + "table" }

// Leader is the key of the weights leader's lock.
func (l Layout) Leader() string { return l.Weights() + "leader" }

// Departed is the folder of the departures shared by the replicas (inside
// the drains folder: one watch reads both).
func (l Layout) Departed() string { return l.Drains() + "departed/" }

// DepartedKey is the key of the departure of endpoint of service.
func (l Layout) DepartedKey(service, endpoint string) string {
	return l.Departed() + segment(service) + "/" + segment(endpoint)
}
