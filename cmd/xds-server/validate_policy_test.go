package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/e2e/harness"
)

// TestValidateConfigEntries: against a real Consul holding a resolver
// that the server would reject (a subset filter on Node.Meta, which
// Consul accepts), validate lists it as a warning with its kind, name,
// field and reason, and exits 0; a good entry is not listed. With
// discovery.consul.config_entries false it is not read; with Consul down
// it is one unchecked warning, still exit 0.
func TestValidateConfigEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Consul")
	}
	consul := harness.Consul(t)
	for _, e := range []api.ConfigEntry{
		&api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "web",
			Subsets: map[string]api.ServiceResolverSubset{"r1": {Filter: "Node.Meta.rack == r1"}}},
		&api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "api",
			Subsets: map[string]api.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "1"`}}},
	} {
		if ok, _, err := consul.Client().ConfigEntries().Set(e, nil); err != nil || !ok {
			t.Fatalf("writing %s %s: %v", e.GetKind(), e.GetName(), err)
		}
	}
	file := writeConfig(t, "discovery: { source: consul }\n")
	validateOut := func(extra ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"validate", "--config", file}, extra...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	addr := "--discovery.consul.address=" + consul.Addr()
	code, stdout, stderr := validateOut(addr)
	want := "  discovery.consul.config_entries: service-resolver web: rejected at " + consul.Addr() + ": Subsets[r1].Filter: "
	if code != 0 || !strings.Contains(stdout, "configuration is valid") || !strings.Contains(stderr, "xds-server: 1 warning:\n"+want) ||
		!strings.Contains(stderr, "(bad_filter)") || strings.Contains(stderr, "api") {
		t.Errorf("validate: exit %d\nstdout %q\nstderr %q\nwant exit 0 and the one warning %q", code, stdout, stderr, want)
	}

	code, stdout, _ = validateOut(addr, "--output", "json")
	var got []config.FieldError
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
		t.Fatalf("--output json: exit %d, %v:\n%s", code, err, stdout)
	}
	if len(got) != 1 || got[0].Key != "discovery.consul.config_entries" || got[0].Value != "service-resolver web" || !got[0].Warning {
		t.Errorf("--output json: %+v", got)
	}

	if code, _, stderr = validateOut(addr, "--discovery.consul.config_entries=false"); code != 0 || strings.Contains(stderr, "config_entries") {
		t.Errorf("config_entries false: exit %d, stderr %q", code, stderr)
	}

	down := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	code, stdout, stderr = validateOut("--discovery.consul.address=" + down)
	if code != 0 || !strings.Contains(stdout, "configuration is valid") ||
		!strings.Contains(stderr, "discovery.consul.config_entries: not checked: Consul at "+down+" could not be asked") {
		t.Errorf("Consul down: exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}
