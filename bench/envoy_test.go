package bench

import (
	"math"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

func TestParseEnvoyHealthy(t *testing.T) {
	m, err := ParseEnvoyHealthy(strings.NewReader(`cluster.bench-svc-000.membership_healthy: 19
cluster.bench-svc-001.default.dc1.internal.7c671ae7-9aad-c764-9cc6-4f10081df651.consul.membership_healthy: 20
cluster.local_agent.membership_healthy: 1
cluster.bench-svc-002.membership_total: 20
cluster_manager.warming_clusters: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"bench-svc-000": 19, "bench-svc-001": 20, "local_agent": 1}
	if len(m) != len(want) {
		t.Errorf("got %v, want %v", m, want)
	}
	for svc, n := range want {
		if m[svc] != n {
			t.Errorf("%s = %d, want %d", svc, m[svc], n)
		}
	}
	if _, err := ParseEnvoyHealthy(strings.NewReader("cluster.a.membership_healthy: 1\ncluster.a.x.membership_healthy: 2\n")); err == nil {
		t.Error("two clusters of one service: no error")
	}
	if _, err := ParseEnvoyHealthy(strings.NewReader("cluster.a.membership_healthy: many\n")); err == nil {
		t.Error("a value that is no number: no error")
	}
}

func envoyTestClusters(hosts map[string]map[string]corev3.HealthStatus) *adminv3.Clusters {
	c := &adminv3.Clusters{}
	for name, ips := range hosts {
		cs := &adminv3.ClusterStatus{Name: name}
		for ip, st := range ips {
			cs.HostStatuses = append(cs.HostStatuses, &adminv3.HostStatus{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 21000}}}},
				HealthStatus: &adminv3.HostHealthStatus{EdsHealthStatus: st}})
		}
		c.ClusterStatuses = append(c.ClusterStatuses, cs)
	}
	return c
}

func TestCheckEnvoyHosts(t *testing.T) {
	cat := Catalog{Services: 2, Endpoints: 2}
	down := func(s, e int) bool { return s == 1 && e == 0 }
	healthy, unhealthy := corev3.HealthStatus_HEALTHY, corev3.HealthStatus_UNHEALTHY
	good := map[string]map[string]corev3.HealthStatus{
		"bench-svc-000":                      {"10.0.0.1": healthy, "10.0.0.2": healthy},
		"bench-svc-001.default.dc1.x.consul": {"10.0.1.1": unhealthy, "10.0.1.2": healthy},
	}
	if err := CheckEnvoyHosts(envoyTestClusters(good), cat, down); err != nil {
		t.Errorf("matching hosts: %v", err)
	}
	for name, tc := range map[string]struct {
		svc, ip string
		st      corev3.HealthStatus
		drop    bool
	}{
		"healthy where Consul has it critical":  {svc: "bench-svc-001.default.dc1.x.consul", ip: "10.0.1.1", st: healthy},
		"unhealthy where Consul has it passing": {svc: "bench-svc-000", ip: "10.0.0.2", st: unhealthy},
		"a host missing":                        {svc: "bench-svc-000", ip: "10.0.0.1", drop: true},
	} {
		hosts := map[string]map[string]corev3.HealthStatus{}
		for svc, ips := range good {
			hosts[svc] = map[string]corev3.HealthStatus{}
			for ip, st := range ips {
				hosts[svc][ip] = st
			}
		}
		if tc.drop {
			delete(hosts[tc.svc], tc.ip)
		} else {
			hosts[tc.svc][tc.ip] = tc.st
		}
		err := CheckEnvoyHosts(envoyTestClusters(hosts), cat, down)
		if err == nil || !strings.Contains(err.Error(), tc.ip) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, tc.ip)
		}
	}
	delete(good, "bench-svc-000")
	if err := CheckEnvoyHosts(envoyTestClusters(good), cat, down); err == nil || !strings.Contains(err.Error(), "bench-svc-000: no cluster") {
		t.Errorf("a missing cluster: got %v", err)
	}
}

func TestEnvoySaid(t *testing.T) {
	dep := "[2026-11-28 12:21:23.965][27132][warning][misc] [source/common/protobuf/message_validator_impl.cc:23] Deprecated field: type envoy.config.cluster.v3.Cluster Using deprecated option 'envoy.config.cluster.v3.Cluster.http2_protocol_options' from file cluster.proto. This configuration will be removed from Envoy soon."
	logs := []string{
		dep + "\n[2026-11-28 12:21:24.020][27132][warning][main] [source/server/server.cc:1059] There is no configured limit to the number of allowed active downstream connections. Configure a limit.\n" +
			"[2026-11-28 12:21:24.100][27132][info][upstream] [source/common/upstream/cds_api_helper.cc:32] cds: add 50 cluster(s)\n",
		strings.Replace(dep, "27132", "99", 1) + "\n[2026-11-28 12:21:25.000][99][warning][config] [source/extensions/config_subscription/grpc/delta_subscription_state.cc:1] delta config for type.googleapis.com/envoy.config.cluster.v3.Cluster rejected: bad\n",
	}
	got := EnvoySaid(logs)
	want := []string{
		"[warning][config] delta config for type.googleapis.com/envoy.config.cluster.v3.Cluster rejected: bad (1 of 2 Envoys)",
		"[warning][misc] Deprecated field: type envoy.config.cluster.v3.Cluster Using deprecated option 'envoy.config.cluster.v3.Cluster.http2_protocol_options' from file cluster.proto (2 of 2 Envoys)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("EnvoySaid =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEnvoyProcReadings(t *testing.T) {
	cpu, err := parseProcStatCPU("4242 (envoy (main)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 150 75 0 0 20 0 3 0 100 0 0")
	if err != nil || math.Abs(cpu-2.25) > 1e-9 {
		t.Errorf("parseProcStatCPU = %v, %v; want 2.25 s (150 + 75 ticks)", cpu, err)
	}
	if _, err := parseProcStatCPU("4242 (envoy) S 1"); err == nil {
		t.Error("a short stat line: no error")
	}
	pss, err := parsePSS("55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss:               80000 kB\nPss:               30000 kB\n")
	if err != nil || pss != 30000*1024 {
		t.Errorf("parsePSS = %v, %v; want 30000 KiB", pss, err)
	}
	r := EnvoyRun{Envoys: 4, RSSBefore: 100 << 20, RSSAfter: 104 << 20, HeapBefore: 10 << 20, HeapAfter: 12 << 20}
	if r.RSSPerEnvoy() != 1<<20 || r.HeapPerEnvoy() != 512<<10 {
		t.Errorf("RSSPerEnvoy %v, HeapPerEnvoy %v; want 1 MiB and 512 KiB", r.RSSPerEnvoy(), r.HeapPerEnvoy())
	}
}
