package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of examples/docker-compose.yaml the test checks.
type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
			Target     string `yaml:"target"`
		} `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
	} `yaml:"services"`
}

// TestDockerCompose checks what can be checked without Docker: the file
// parses, the expected services are there, every service has an image or
// a build of an existing Dockerfile stage, every bind-mounted file exists,
// and the xds-server config it runs is an example.
func TestDockerCompose(t *testing.T) {
	repoRoot(t)
	b, err := os.ReadFile("examples/docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"consul", "xds-server", "envoy", "web", "api"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	dockerfile, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range c.Services {
		switch {
		case s.Build != nil:
			if filepath.Join("examples", s.Build.Context) != "." || s.Build.Dockerfile != "Dockerfile" {
				t.Errorf("%s: build %+v, want the repository root's Dockerfile", name, *s.Build)
			}
			if !strings.Contains(string(dockerfile), " AS "+s.Build.Target+"\n") {
				t.Errorf("%s: Dockerfile has no stage %q", name, s.Build.Target)
			}
		case s.Image == "":
			t.Errorf("%s: neither image nor build", name)
		}
		for _, v := range s.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if _, err := os.Stat(filepath.Join("examples", host)); err != nil {
				t.Errorf("%s: volume %q: %v", name, v, err)
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s: port %q is not bound to the host's loopback", name, p)
			}
		}
	}
	srv := c.Services["xds-server"]
	if i := slices.Index(srv.Command, "--config"); i < 0 || i+1 >= len(srv.Command) {
		t.Errorf("xds-server: command %q has no --config", srv.Command)
	} else if _, err := os.Stat(srv.Command[i+1]); err != nil {
		t.Errorf("xds-server: config: %v", err)
	}
	if got := c.Services["envoy"].Volumes; len(got) == 0 || !strings.HasPrefix(got[0], "./docker/envoy-bootstrap.yaml:") {
		t.Errorf("envoy: volumes %q, want the generated docker bootstrap", got)
	}
}
