package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// touch makes empty files named names in a temp dir and returns the dir.
func touch(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSecuritySettings(t *testing.T) {
	dir := touch(t, "s.crt", "s.key", "ca.pem", "token")
	f := func(n string) string { return filepath.Join(dir, n) }
	file := writeConfig(t, `
xds:
  tls: { cert_file: `+f("s.crt")+`, key_file: `+f("s.key")+`, client_ca_file: `+f("ca.pem")+` }
  authorization:
    rules:
      - identities: ["spiffe://example.org/envoy/*"]
        node_ids: ["envoy-*"]
        clusters: [edge]
      - identities: [ops.example.org]
ratelimit:
  tls: { cert_file: `+f("s.crt")+`, key_file: `+f("s.key")+`, client_ca_file: `+f("ca.pem")+` }
  authorization: { identities: ["spiffe://example.org/envoy/*"] }
admin:
  address: 0.0.0.0:19000
  tls: { cert_file: `+f("s.crt")+`, key_file: `+f("s.key")+` }
  token_file: `+f("token")+`
discovery:
  consul: { token_file: `+f("token")+`, tls: { ca_file: `+f("ca.pem")+`, server_name: consul.example.org } }
`)
	cfg, err := loadArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	rules := cfg.ServerConfig().Authorization
	if len(rules) != 2 || rules[0].NodeIDs[0] != "envoy-*" || rules[0].Clusters[0] != "edge" || rules[1].Identities[0] != "ops.example.org" || rules[1].NodeIDs != nil {
		t.Errorf("rules: %+v", rules)
	}
	if c := cfg.XDS.TLS.Server("xds"); c.Name != "xds" || c.ClientCAFile != f("ca.pem") || c.CertFile != f("s.crt") {
		t.Errorf("xds tls: %+v", c)
	}
	if got := cfg.RateLimit.Authorization.Identities; !slices.Equal(got, []string{"spiffe://example.org/envoy/*"}) {
		t.Errorf("ratelimit identities: %v", got)
	}
	if cs := cfg.ConsulSource(); cs.TokenFile != f("token") || cs.TLS.CAFile != f("ca.pem") || cs.TLS.ServerName != "consul.example.org" {
		t.Errorf("consul: %+v", cs)
	}
}

func TestSecurityProblems(t *testing.T) {
	dir := touch(t, "s.crt", "s.key", "ca.pem", "token")
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	for name, tc := range map[string]struct {
		file string
		args []string
		want []string // substrings of the problems, in order
	}{
		"public admin without tls and token": {args: []string{"--admin.address", "0.0.0.0:19000"},
			want: []string{"admin.address: 0.0.0.0:19000: is not a loopback address", "admin.allow_insecure: true"}},
		"all interfaces":            {args: []string{"--admin.address", ":19000"}, want: []string{"admin.address: :19000: is not a loopback address"}},
		"public admin with a token": {args: []string{"--admin.address", "10.0.0.1:19000", "--admin.token_file", f("token")}},
		"public admin with client certificates": {args: []string{"--admin.address", "10.0.0.1:19000", "--admin.tls.cert_file", f("s.crt"),
			"--admin.tls.key_file", f("s.key"), "--admin.tls.client_ca_file", f("ca.pem")}},
		"public admin with tls but no token": {args: []string{"--admin.address", "10.0.0.1:19000", "--admin.tls.cert_file", f("s.crt"),
			"--admin.tls.key_file", f("s.key")}, want: []string{"admin.address: 10.0.0.1:19000: is not a loopback"}},
		"empty token file":                   {args: []string{"--admin.token_file", f("empty")}, want: []string{"admin.token_file: " + f("empty") + ": holds no token (the file is empty)"}},
		"public admin, allowed":              {args: []string{"--admin.address", "0.0.0.0:19000", "--admin.allow_insecure"}},
		"localhost admin":                    {args: []string{"--admin.address", "localhost:19000"}},
		"ipv6 loopback admin":                {args: []string{"--admin.address", "[::1]:19000"}},
		"cert without key":                   {args: []string{"--xds.tls.cert_file", f("s.crt")}, want: []string{"xds.tls.cert_file: cert_file and key_file go together"}},
		"client ca without cert":             {args: []string{"--ratelimit.tls.client_ca_file", f("ca.pem")}, want: []string{"ratelimit.tls.client_ca_file: " + f("ca.pem") + ": needs ratelimit.tls.cert_file"}},
		"missing file":                       {args: []string{"--admin.token_file", f("nope")}, want: []string{"admin.token_file: " + f("nope") + ": cannot be read: no such file"}},
		"rules without mTLS":                 {file: "xds: { authorization: { rules: [ { identities: [a] } ] } }\n", want: []string{"xds.authorization.rules: needs xds.tls.client_ca_file"}},
		"rule without identities":            {file: "xds: { authorization: { rules: [ { node_ids: [a] } ] } }\n", want: []string{"xds.authorization.rules: needs", "xds.authorization.rules[0].identities: is empty"}},
		"rule with an unknown key":           {file: "xds: { authorization: { rules: [ { identity: [a] } ] } }\n", want: []string{"xds.authorization.rules: needs", "xds.authorization.rules[0].identities: is empty", "xds.authorization.rules[0].identity: unknown key (a rule has identities, node_ids and clusters)"}},
		"rules not a list":                   {file: "xds: { authorization: { rules: 5 } }\n", want: []string{"xds.authorization.rules: 5: is not a list"}},
		"empty glob":                         {file: "xds: { authorization: { rules: [ { identities: [''] } ] } }\n", want: []string{"xds.authorization.rules: needs", `xds.authorization.rules[0].identities[0]: "": is empty`}},
		"ratelimit identities without mTLS":  {args: []string{"--ratelimit.authorization.identities", "a,b"}, want: []string{"ratelimit.authorization.identities: [a, b]: needs ratelimit.tls.client_ca_file"}},
		"consul client cert without its key": {args: []string{"--discovery.consul.tls.cert_file", f("s.crt")}, want: []string{"discovery.consul.tls.cert_file: cert_file and key_file go together"}},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			_, err := loadArgs(t, args...)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected problems: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no problem")
			}
			rest := err.Error()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("problems %q lack %q (in order)", err, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
