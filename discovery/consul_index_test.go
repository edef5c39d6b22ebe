package discovery

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

func check(id, status string) *api.HealthCheck {
	return &api.HealthCheck{CheckID: id, Status: status}
}

func TestConsulHealth(t *testing.T) {
	svc := &api.AgentService{ID: "web-1", Weights: api.AgentWeights{Passing: 10, Warning: 3}}
	for name, tc := range map[string]struct {
		svc       *api.AgentService
		checks    api.HealthChecks
		warningAs Health
		health    Health
		weight    uint32
	}{
		"no checks: healthy, passing weight":     {svc: svc, health: HealthHealthy, weight: 10},
		"all passing":                            {svc: svc, checks: api.HealthChecks{check("a", "passing"), check("serfHealth", "passing")}, health: HealthHealthy, weight: 10},
		"a warning: healthy, warning weight":     {svc: svc, checks: api.HealthChecks{check("a", "passing"), check("b", "warning")}, health: HealthHealthy, weight: 3},
		"a warning as degraded":                  {svc: svc, checks: api.HealthChecks{check("b", "warning")}, warningAs: HealthDegraded, health: HealthDegraded, weight: 3},
		"critical beats warning":                 {svc: svc, checks: api.HealthChecks{check("b", "warning"), check("c", "critical")}, health: HealthUnhealthy},
		"unknown status fails closed":            {svc: svc, checks: api.HealthChecks{check("a", "bogus")}, health: HealthUnhealthy},
		"service maintenance drains":             {svc: svc, checks: api.HealthChecks{check("a", "passing"), check("_service_maintenance:web-1", "critical")}, health: HealthDraining},
		"node maintenance drains":                {svc: svc, checks: api.HealthChecks{check("_node_maintenance", "critical"), check("a", "passing")}, health: HealthDraining},
		"maintenance beats critical":             {svc: svc, checks: api.HealthChecks{check("c", "critical"), check("_node_maintenance", "critical")}, health: HealthDraining},
		"status maintenance drains":              {svc: svc, checks: api.HealthChecks{check("m", "maintenance")}, health: HealthDraining},
		"another service's maintenance id":       {svc: svc, checks: api.HealthChecks{check("_service_maintenance:web-2", "passing")}, health: HealthHealthy, weight: 10},
		"passing weight 0 stays 0 (=1)":          {svc: &api.AgentService{ID: "x"}, health: HealthHealthy, weight: 0},
		"negative weight is 0":                   {svc: &api.AgentService{ID: "x", Weights: api.AgentWeights{Passing: -4}}, health: HealthHealthy, weight: 0},
		"a dead xds-server replica's node check": {svc: svc, checks: api.HealthChecks{check("xds-server-ha:vm-1-ab", "critical"), check("a", "passing")}, health: HealthHealthy, weight: 10},
		"a service check named like one":         {svc: svc, checks: api.HealthChecks{{CheckID: "xds-server-ha:x", ServiceID: "web-1", Status: "critical"}}, health: HealthUnhealthy},
		"nil service and nil check":              {checks: api.HealthChecks{nil, check("a", "passing")}, health: HealthHealthy},
	} {
		t.Run(name, func(t *testing.T) {
			warningAs := tc.warningAs
			if warningAs == HealthUnknown {
				warningAs = HealthHealthy
			}
			h, w := consulHealth(tc.svc, tc.checks, warningAs)
			if h != tc.health || w != tc.weight {
				t.Errorf("consulHealth = %v, %d; want %v, %d", h, w, tc.health, tc.weight)
			}
		})
	}
}

func TestConsulEndpoints(t *testing.T) {
	node := func(name, addr, dc string) *api.Node { return &api.Node{Node: name, Address: addr, Datacenter: dc} }
	entries := []*api.ServiceEntry{
		{Node: node("n1", "10.0.0.1", "dc1"), Service: &api.AgentService{ID: "web-1", Port: 80, Tags: []string{"zone=a", "x"},
			Meta: map[string]string{"region": "eu"}, Weights: api.AgentWeights{Passing: 2}}},
		{Node: node("n2", "10.0.0.2", ""), Service: &api.AgentService{ID: "web-2", Address: "10.9.9.2", Port: 81, Tags: []string{"x"}}},
		{Node: node("n3", "10.0.0.3", "dc1"), Service: &api.AgentService{ID: "dup", Port: 82, Tags: []string{"x"}}},
		{Node: node("n4", "10.0.0.4", "dc1"), Service: &api.AgentService{ID: "dup", Port: 83, Tags: []string{"x"}}},
		{Node: node("n5", "10.0.0.5", "dc1"), Service: &api.AgentService{ID: "web-1", Port: 84}}, // no tag x: filtered, no clash
		{Node: node("n6", "10.0.0.6", "dc1")}, // no service
		nil,
	}
	got := consulEndpoints(entries, []string{"x"}, HealthHealthy, "dc-default")
	want := []Endpoint{
		{ID: "web-1", Address: "10.0.0.1", Port: 80, Health: HealthHealthy, Weight: 2, Locality: Locality{Region: "eu", Zone: "a"},
			Meta: map[string]string{"region": "eu"}, Tags: []string{"zone=a", "x"}, Node: "n1", Datacenter: "dc1"},
		{ID: "web-2", Address: "10.9.9.2", Port: 81, Health: HealthHealthy, Locality: Locality{Region: "dc-default"}, Tags: []string{"x"}, Node: "n2", Datacenter: "dc-default"},
		{ID: "n3/dup", Address: "10.0.0.3", Port: 82, Health: HealthHealthy, Locality: Locality{Region: "dc1"}, Tags: []string{"x"}, Node: "n3", Datacenter: "dc1"},
		{ID: "n4/dup", Address: "10.0.0.4", Port: 83, Health: HealthHealthy, Locality: Locality{Region: "dc1"}, Tags: []string{"x"}, Node: "n4", Datacenter: "dc1"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d endpoints %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Errorf("endpoint %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestConsulServiceNames(t *testing.T) {
	catalog := map[string][]string{"consul": nil, "web": {"x", "y"}, "api": {"x"}, "db": {}}
	for name, tc := range map[string]struct {
		only, tags []string
		want       string
	}{
		"all but consul":       {want: "api,db,web"},
		"only listed":          {only: []string{"web", "db", "missing", "consul"}, want: "db,web"},
		"by tags":              {tags: []string{"x"}, want: "api,web"},
		"by all tags":          {tags: []string{"y", "x"}, want: "web"},
		"listed and tagged":    {only: []string{"api"}, tags: []string{"y"}, want: ""},
		"no service has a tag": {tags: []string{"nope"}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if got := strings.Join(consulServiceNames(catalog, tc.only, tc.tags), ","); got != tc.want {
				t.Errorf("names = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConsulConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  ConsulConfig
		want []string // substrings of the error; none: valid
	}{
		"zero value":           {},
		"everything set":       {cfg: ConsulConfig{Address: "consul.internal:8500", Wait: time.Minute, MinInterval: time.Second, BackoffBase: time.Second, BackoffMax: time.Minute, WarningAs: "degraded", Services: []string{"a"}, Tags: []string{"t"}}},
		"https with prefix":    {cfg: ConsulConfig{Address: "https://10.0.0.1:8501/consul"}},
		"unix socket":          {cfg: ConsulConfig{Address: "unix:///run/consul.sock"}},
		"ipv6":                 {cfg: ConsulConfig{Address: "[::1]:8500"}},
		"no port":              {cfg: ConsulConfig{Address: "localhost"}, want: []string{"discovery: consul: Address:"}},
		"port out of range":    {cfg: ConsulConfig{Address: "localhost:70000"}, want: []string{"Address:", "[1, 65535]"}},
		"bad scheme":           {cfg: ConsulConfig{Address: "ftp://localhost:8500"}, want: []string{"Address:", "scheme"}},
		"wait too long":        {cfg: ConsulConfig{Wait: 11 * time.Minute}, want: []string{"discovery: consul: Wait:"}},
		"negative durations":   {cfg: ConsulConfig{Wait: -1, MinInterval: -1, BackoffBase: -1, BackoffMax: -1}, want: []string{"Wait:", "MinInterval:", "BackoffBase:", "BackoffMax:"}},
		"max below base":       {cfg: ConsulConfig{BackoffBase: time.Second, BackoffMax: time.Millisecond}, want: []string{"BackoffMax:", "below BackoffBase"}},
		"max below default":    {cfg: ConsulConfig{BackoffMax: time.Millisecond}, want: []string{"BackoffMax:"}},
		"base above default":   {cfg: ConsulConfig{BackoffBase: time.Minute}, want: []string{"BackoffMax: 30s is below BackoffBase 1m0s"}},
		"warning as":           {cfg: ConsulConfig{WarningAs: "sick"}, want: []string{"discovery: consul: WarningAs:", "healthy, degraded"}},
		"empty service, tag":   {cfg: ConsulConfig{Services: []string{"a", " "}, Tags: []string{""}}, want: []string{"Services: entry 1", "Tags: entry 0"}},
		"every problem joined": {cfg: ConsulConfig{Address: "x", Wait: -1, WarningAs: "x"}, want: []string{"Address:", "Wait:", "WarningAs:"}},
		"datacenters":          {cfg: ConsulConfig{Datacenter: "dc1", Datacenters: []string{"dc1", "dc2"}}},
		"datacenters alone":    {cfg: ConsulConfig{Datacenters: []string{"dc2", "dc1"}}},
		"datacenters bad":      {cfg: ConsulConfig{Datacenter: "dc1", Datacenters: []string{"dc2", "", "dc2"}}, want: []string{"Datacenters: entry 1 is empty", `entry 2 ("dc2") repeats entry 0`, `first entry "dc2"`}},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				if _, err := NewConsul(tc.cfg); err != nil {
					t.Fatalf("NewConsul = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to contain %q", err, w)
				}
			}
			if _, err := NewConsul(tc.cfg); err == nil {
				t.Error("NewConsul accepted an invalid config")
			}
		})
	}
}

func TestNewConsulDefaults(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "elsewhere:1") // not read: "" means 127.0.0.1:8500
	c, err := NewConsul(ConsulConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := c.cfg
	if got.Address != "127.0.0.1:8500" || got.Wait != 5*time.Minute || got.MinInterval != 100*time.Millisecond ||
		got.BackoffBase != 250*time.Millisecond || got.BackoffMax != 30*time.Second || c.warningAs != HealthHealthy ||
		got.Logger == nil || got.Now == nil {
		t.Errorf("defaults = %+v", got)
	}
}
