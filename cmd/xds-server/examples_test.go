package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/ratelimit"
)

var updateExamples = flag.Bool("update-examples", false, "rewrite the generated example bootstraps")

// exampleBootstraps are the checked-in bootstraps and the commands that
// generate them (each file's header repeats its command).
var exampleBootstraps = map[string][]string{
	"examples/envoy-bootstrap.yaml":        {"envoy", "bootstrap", "--node-id", "envoy-1", "--cluster", "edge"},
	"examples/envoy/envoy-bootstrap.yaml":  {"envoy", "bootstrap", "--node-id", "edge-1", "--cluster", "edge"},
	"examples/docker/envoy-bootstrap.yaml": {"envoy", "bootstrap", "--node-id", "edge-1", "--cluster", "edge", "--xds-address", "xds-server:18000", "--admin-address", "0.0.0.0:9901"},
	"examples/grpc-bootstrap.json":         {"grpc", "bootstrap", "--node-id", "grpc-client-1", "--cluster", "grpc-clients", "--zone", "zone-a"},
}

// repoRoot changes into the repository root for the rest of the test, so
// that the relative paths inside the examples resolve as in the README.
func repoRoot(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", ".."))
}

// exampleFiles lists the files under examples/ whose base name matches pattern.
func exampleFiles(t *testing.T, pattern string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ok, _ := filepath.Match(pattern, d.Name()); ok && !d.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExampleBootstrapsAreGenerated(t *testing.T) {
	repoRoot(t)
	for path, args := range exampleBootstraps {
		t.Run(path, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("xds-server %s: exit %d: %s", strings.Join(args, " "), code, &stderr)
			}
			if *updateExamples {
				if err := os.WriteFile(path, stdout.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(stdout.Bytes(), want) {
				t.Errorf("%s differs from `xds-server %s` (rerun with -update-examples)", path, strings.Join(args, " "))
			}
		})
	}
}

// TestExampleEnvoyBootstraps parses every example Envoy bootstrap as Envoy
// would (unknown fields are errors) and validates it.
func TestExampleEnvoyBootstraps(t *testing.T) {
	repoRoot(t)
	files := exampleFiles(t, "*bootstrap*.yaml")
	if len(files) < 3 {
		t.Fatalf("found only %v", files)
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := envoy.ParseBootstrapYAML(b)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if bs.GetNode().GetId() == "" || bs.GetDynamicResources().GetAdsConfig() == nil {
			t.Errorf("%s: no node id or no ADS", path)
		}
	}
}

// TestExampleGRPCBootstraps decodes every example gRPC bootstrap strictly.
// That grpc-go accepts what GRPCBootstrap writes is tested with a real
// client in the envoy package; TestExampleBootstrapsAreGenerated ties the
// files to it.
func TestExampleGRPCBootstraps(t *testing.T) {
	repoRoot(t)
	for _, path := range exampleFiles(t, "*bootstrap*.json") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XDSServers []struct {
				ServerURI      string                  `json:"server_uri"`
				ChannelCreds   []struct{ Type string } `json:"channel_creds"`
				ServerFeatures []string                `json:"server_features"`
			} `json:"xds_servers"`
			Node struct {
				ID, Cluster string
				Locality    map[string]string
			} `json:"node"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if len(doc.XDSServers) != 1 || doc.XDSServers[0].ServerURI == "" || doc.Node.ID == "" {
			t.Errorf("%s: %+v", path, doc)
		}
	}
}

// TestExampleConfigs runs every examples/**/xds-server*.yaml through the
// same load and validation as `xds-server validate --config`.
func TestExampleConfigs(t *testing.T) {
	repoRoot(t)
	files := exampleFiles(t, "xds-server*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples/**/xds-server*.yaml")
	}
	for _, path := range files {
		t.Run(path, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{"validate", "--config", path}, &stdout, &stderr); code != 0 {
				t.Errorf("xds-server validate --config %s: exit %d:\n%s", path, code, &stderr)
			}
		})
	}
}

// TestExampleRateLimitConfigs loads every rate-limit config under a
// examples/**/ratelimit directory.
func TestExampleRateLimitConfigs(t *testing.T) {
	repoRoot(t)
	dirs := 0
	err := filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() != "ratelimit" {
			return err
		}
		dirs++
		if _, err := ratelimit.LoadPath(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		return fs.SkipDir
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range exampleFiles(t, "ratelimit*.yaml") {
		if _, err := ratelimit.LoadPath(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	t.Logf("%d rate-limit config directories", dirs)
}

// consulService is the part of a Consul agent service definition the
// examples use; anything else in them is an error.
type consulService struct {
	ID      string            `json:"id"`
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Port    int               `json:"port"`
	Tags    []string          `json:"tags"`
	Meta    map[string]string `json:"meta"`
	Check   struct {
		Name                           string `json:"name"`
		HTTP                           string `json:"http"`
		Interval                       string `json:"interval"`
		Timeout                        string `json:"timeout"`
		DeregisterCriticalServiceAfter string `json:"deregister_critical_service_after"`
	} `json:"check"`
}

func TestExampleConsulServices(t *testing.T) {
	repoRoot(t)
	files, _ := filepath.Glob("examples/consul/*.json")
	if len(files) < 2 {
		t.Fatalf("want the web and api definitions, found %v", files)
	}
	ids := map[string]string{}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Services []consulService `json:"services"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, s := range doc.Services {
			if s.Name == "" || s.ID == "" || s.Port < 1 || s.Port > 65535 || s.Address == "" {
				t.Errorf("%s: %+v", path, s)
			}
			if other, dup := ids[s.ID]; dup {
				t.Errorf("%s: id %s already in %s", path, s.ID, other)
			}
			ids[s.ID] = path
			u, err := url.Parse(s.Check.HTTP)
			if err != nil || u.Port() != strconv.Itoa(s.Port) || u.Path != "/healthz" {
				t.Errorf("%s: %s: check %q is not /healthz on the service port", path, s.ID, s.Check.HTTP)
			}
			if _, err := strconv.Atoi(s.Meta["orca_port"]); err != nil {
				t.Errorf("%s: %s: meta orca_port %q", path, s.ID, s.Meta["orca_port"])
			}
		}
	}
}
