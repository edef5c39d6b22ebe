package config

import (
	"slices"
	"strings"
	"testing"
)

// TestConsulDatacenters: discovery.consul.datacenters from the file, env
// and flags reaches the Consul source; bad lists are refused with reasons.
func TestConsulDatacenters(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  string
		args []string
		want []string
	}{
		"default: none":      {want: nil},
		"file":               {file: "discovery: { source: consul, consul: { datacenters: [dc1, dc2] } }\n", want: []string{"dc1", "dc2"}},
		"env":                {env: "dc1,dc3", want: []string{"dc1", "dc3"}},
		"flag":               {args: []string{"--discovery.consul.datacenters", "dc2,dc1"}, want: []string{"dc2", "dc1"}},
		"with the single dc": {file: "discovery: { consul: { datacenter: dc1, datacenters: [dc1, dc2] } }\n", want: []string{"dc1", "dc2"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
			}
			if tc.env != "" {
				t.Setenv("XDS_SERVER_DISCOVERY_CONSUL_DATACENTERS", tc.env)
			}
			cfg, err := loadArgs(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ConsulSource().Datacenters; !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Errorf("datacenters = %q, want %q", got, tc.want)
			}
		})
	}
	for name, tc := range map[string]struct {
		file string
		want string
	}{
		"first is not datacenter": {file: "discovery: { source: consul, consul: { datacenter: dc1, datacenters: [dc2, dc1] } }\n",
			want: `discovery.consul.datacenters: [dc2, dc1]: the first entry "dc2" (the local datacenter) is not the datacenter "dc1" (discovery.consul.datacenter): list the local datacenter first`},
		"repeated": {file: "discovery: { source: consul, consul: { datacenters: [dc1, dc2, dc1] } }\n", want: `entry 2 ("dc1") repeats entry 0`},
		"empty":    {file: "discovery: { source: consul, consul: { datacenters: [dc1, ''] } }\n", want: "entry 1 is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, "--config", writeConfig(t, tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one with %q", err, tc.want)
			}
		})
	}
}
