package translate

import (
	"reflect"
	"testing"
	"time"

	"github.com/xds-server/xds-server/envoy"
)

// TestClusterStamp: equal settings stamp equal (built apart), and each
// part that makes the cluster changes the stamp.
func TestClusterStamp(t *testing.T) {
	base := func() ServiceSettings {
		return ServiceSettings{LBPolicy: envoy.RingHash, ConnectTimeout: 2 * time.Second,
			Cluster: envoy.ClusterOptions{RingHash: envoy.RingHashSize{Min: 1024}}}
	}
	if a, b := ClusterStamp(base()), ClusterStamp(base()); a != b || len(a) != 16 {
		t.Fatalf("equal settings stamp %q and %q", a, b)
	}
	for name, change := range map[string]func(*ServiceSettings){
		"lb policy":       func(s *ServiceSettings) { s.LBPolicy = envoy.LeastRequest },
		"connect timeout": func(s *ServiceSettings) { s.ConnectTimeout = 3 * time.Second },
		"ring size":       func(s *ServiceSettings) { s.Cluster.RingHash.Min = 2048 },
		"circuit breaker": func(s *ServiceSettings) { s.Cluster.CircuitBreakers.MaxRetries = 9 },
	} {
		s := base()
		change(&s)
		if ClusterStamp(s) == ClusterStamp(base()) {
			t.Errorf("%s: stamp unchanged", name)
		}
	}
}

// TestClusterStampPrintsValues: the stamp prints the cluster options,
// which must hold values only: a pointer, map, slice or func would print
// an address or in random order, and every pass would change every load
// assignment.
func TestClusterStampPrintsValues(t *testing.T) {
	var check func(reflect.Type, string)
	check = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
			t.Errorf("%s is a %s", path, typ.Kind())
		case reflect.Struct:
			for i := range typ.NumField() {
				check(typ.Field(i).Type, path+"."+typ.Field(i).Name)
			}
		}
	}
	check(reflect.TypeOf(envoy.ClusterOptions{}), "ClusterOptions")
}
