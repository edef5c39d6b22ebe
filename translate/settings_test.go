package translate

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
)

// TestServiceIgnoresEndpointOrder: the load assignment (bytes and hash)
// does not depend on the order discovery listed the endpoints in, so
// replicas whose sources listed them differently agree; the input is not
// modified.
func TestServiceIgnoresEndpointOrder(t *testing.T) {
	svc := discovery.Service{Name: "s"}
	for i := range 12 {
		svc.Endpoints = append(svc.Endpoints, discovery.Endpoint{
			ID: string(rune('a' + i)), Address: "10.0.0.1", Port: 1000 + i, Health: discovery.HealthHealthy,
			Locality: discovery.Locality{Zone: []string{"z1", "z2"}[i%2]}, Meta: map[string]string{"k": "v", "a": "b"},
		})
	}
	want, err := hashOf(Service(svc, ServiceSettings{}, nil))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		shuffled := svc
		shuffled.Endpoints = slices.Clone(svc.Endpoints)
		rng.Shuffle(len(shuffled.Endpoints), func(i, j int) {
			shuffled.Endpoints[i], shuffled.Endpoints[j] = shuffled.Endpoints[j], shuffled.Endpoints[i]
		})
		before := slices.Clone(shuffled.Endpoints)
		got, err := hashOf(Service(shuffled, ServiceSettings{}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("order %v: hash %s, sorted input gives %s", ids(shuffled.Endpoints), got, want)
		}
		if !slices.EqualFunc(before, shuffled.Endpoints, func(a, b discovery.Endpoint) bool { return a.ID == b.ID }) {
			t.Fatal("Service reordered its input")
		}
	}
}

func ids(eps []discovery.Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.ID
	}
	return out
}

// hashOf is the SHA-256 of the deterministic marshaling of s's load
// assignment.
func hashOf(s envoy.Service) (string, error) {
	r, err := ServiceResources(s)
	if err != nil {
		return "", err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.LoadAssignment)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
