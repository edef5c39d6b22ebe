package bench

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Key identifies an endpoint as a node sees it in EDS.
type Key struct {
	Service string // ClusterLoadAssignment cluster_name
	Addr    string // socket address, host:port
}

// cla is the decoded content of one ClusterLoadAssignment: the health of
// each endpoint by address.
type cla map[string]corev3.HealthStatus

// entry is a decoded EDS resource, shared by every node that received it.
type entry struct {
	once sync.Once
	clas map[string]cla // its one service -> content
	err  error
}

// table decodes each distinct EDS resource once for the whole fleet: a
// SotW one by the response's version_info (a content hash of the whole
// type, so it fixes the content of every resource under it) and its name,
// a delta one by name and resource version.
type table struct {
	mu    sync.Mutex
	sotw  map[[2]string]*entry
	delta map[[2]string]*entry
	bytes atomic.Int64 // encoded responses of every type received, in bytes
}

func newTable() *table {
	return &table{sotw: map[[2]string]*entry{}, delta: map[[2]string]*entry{}}
}

func (t *table) sotwEntry(version, name string) *entry {
	return t.entry(t.sotw, [2]string{version, name})
}

func (t *table) deltaEntry(name, version string) *entry {
	return t.entry(t.delta, [2]string{name, version})
}

// entry returns m's entry of key, made if missing; m is one of t's maps.
func (t *table) entry(m map[[2]string]*entry, key [2]string) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := m[key]
	if !ok {
		e = &entry{}
		m[key] = e
	}
	return e
}

// sotwResponse is what a node keeps of a DiscoveryResponse.
type sotwResponse struct {
	version, typeURL, nonce string
	eds                     []sotwResource // EDS only: the load assignments it carries
}

// sotwResource is one load assignment of a SotW response.
type sotwResource struct {
	name string // cluster_name
	eds  *entry
}

// deltaResource is what a node keeps of one delta Resource.
type deltaResource struct {
	name string
	eds  *entry // EDS only
}

// deltaResponse is what a node keeps of a DeltaDiscoveryResponse.
type deltaResponse struct {
	typeURL, nonce string
	resources      []deltaResource
	removed        []string
}

// codec marshals requests as usual and reads responses with protowire,
// skipping payloads it does not need (see table).
type codec struct{ t *table }

var _ encoding.CodecV2 = codec{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("bench: codec: cannot marshal %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("bench: codec: %w", err)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	switch m := v.(type) {
	case *sotwResponse:
		c.t.bytes.Add(int64(len(b)))
		return c.t.parseSotW(b, m)
	case *deltaResponse:
		c.t.bytes.Add(int64(len(b)))
		return c.t.parseDelta(b, m)
	case proto.Message:
		return proto.Unmarshal(b, m)
	}
	return fmt.Errorf("bench: codec: cannot unmarshal into %T", v)
}

// Field numbers of DiscoveryResponse, DeltaDiscoveryResponse and Resource.
const (
	fVersion      = 1 // version_info, system_version_info, Resource.version
	fResources    = 2 // resources, Resource.resource
	fTypeURL      = 4
	fNonce        = 5
	fRemoved      = 6 // delta removed_resources
	fResourceName = 3 // Resource.name
	fAnyValue     = 2 // google.protobuf.Any value
	fClusterName  = 1 // ClusterLoadAssignment.cluster_name
)

var errWire = errors.New("bench: malformed protobuf")

// fields calls f for each top-level field of b with its number and, for
// length-delimited fields, its bytes; other fields are skipped.
func fields(b []byte, f func(num protowire.Number, v []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errWire
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errWire
			}
			f(num, v)
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return errWire
		}
		b = b[n:]
	}
	return nil
}

// envelope reads what responses of both protocols carry (resources, type
// URL, nonce) and hands every other field to other.
func envelope(b []byte, other func(protowire.Number, []byte)) (res [][]byte, typeURL, nonce string, err error) {
	err = fields(b, func(num protowire.Number, v []byte) {
		switch num {
		case fResources:
			res = append(res, v)
		case fTypeURL:
			typeURL = string(v)
		case fNonce:
			nonce = string(v)
		default:
			other(num, v)
		}
	})
	return res, typeURL, nonce, err
}

func (t *table) parseSotW(b []byte, r *sotwResponse) error {
	res, typeURL, nonce, err := envelope(b, func(num protowire.Number, v []byte) {
		if num == fVersion {
			r.version = string(v)
		}
	})
	r.typeURL, r.nonce = typeURL, nonce
	if err != nil || r.typeURL != resource.EndpointType {
		return err
	}
	for _, anyBytes := range res {
		value, err := anyValue(anyBytes)
		if err != nil {
			return err
		}
		var name string
		if err := fields(value, func(num protowire.Number, v []byte) {
			if num == fClusterName {
				name = string(v)
			}
		}); err != nil {
			return err
		}
		e := t.sotwEntry(r.version, name)
		e.once.Do(func() { e.clas, e.err = decodeCLAs(value, "EDS resource") })
		if e.err != nil {
			return e.err
		}
		r.eds = append(r.eds, sotwResource{name: name, eds: e})
	}
	return nil
}

// anyValue returns the value field of an encoded Any.
func anyValue(anyBytes []byte) ([]byte, error) {
	var value []byte
	err := fields(anyBytes, func(num protowire.Number, v []byte) {
		if num == fAnyValue {
			value = v
		}
	})
	return value, err
}

// decodeCLAs decodes an encoded ClusterLoadAssignment into its cluster's
// hosts; what names the resource in the error.
func decodeCLAs(value []byte, what string) (map[string]cla, error) {
	var c endpointv3.ClusterLoadAssignment
	if err := proto.Unmarshal(value, &c); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", what, err)
	}
	return map[string]cla{c.GetClusterName(): decodeCLA(&c)}, nil
}

func (t *table) parseDelta(b []byte, r *deltaResponse) error {
	res, typeURL, nonce, err := envelope(b, func(num protowire.Number, v []byte) {
		if num == fRemoved {
			r.removed = append(r.removed, string(v))
		}
	})
	r.typeURL, r.nonce = typeURL, nonce
	if err != nil || r.typeURL != resource.EndpointType {
		return err
	}
	for _, rb := range res {
		var name, version string
		var payload []byte
		if err := fields(rb, func(num protowire.Number, v []byte) {
			switch num {
			case fResourceName:
				name = string(v)
			case fVersion:
				version = string(v)
			case fResources:
				payload = v
			}
		}); err != nil {
			return err
		}
		e := t.deltaEntry(name, version)
		e.once.Do(func() { e.clas, e.err = decodeDeltaCLA(payload) })
		if e.err != nil {
			return e.err
		}
		r.resources = append(r.resources, deltaResource{name: name, eds: e})
	}
	return nil
}

// decodeDeltaCLA decodes the Any payload of a delta EDS resource.
func decodeDeltaCLA(anyBytes []byte) (map[string]cla, error) {
	value, err := anyValue(anyBytes)
	if err != nil {
		return nil, err
	}
	return decodeCLAs(value, "delta EDS resource")
}

func decodeCLA(c *endpointv3.ClusterLoadAssignment) cla {
	out := cla{}
	for _, l := range c.GetEndpoints() {
		for _, le := range l.GetLbEndpoints() {
			sa := le.GetEndpoint().GetAddress().GetSocketAddress()
			out[net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))] = le.GetHealthStatus()
		}
	}
	return out
}
