package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBootstrapCommand(t *testing.T) {
	for name, tc := range map[string]struct {
		args       []string
		code       int
		wantOut    []string // substrings of stdout
		wantErrOut []string // substrings of stderr
	}{
		"envoy help lists every flag": {args: []string{"envoy", "bootstrap", "--help"}, wantOut: []string{
			"--node-id", "--cluster", "--xds-address", "--locality", "--region", "--zone", "--sub-zone", "--datacenter",
			"--delta", "--admin-address", "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name", "--output"}},
		"grpc help has no envoy flags": {args: []string{"grpc", "bootstrap", "-h"}, wantOut: []string{"--node-id", "--zone", "--output"}},
		"delta with locality": {args: []string{"envoy", "bootstrap", "--node-id", "e1", "--cluster", "edge", "--delta",
			"--locality", "eu/eu-1/rack-2"}, wantOut: []string{"api_type: DELTA_GRPC", "sub_zone: rack-2",
			"#   xds-server envoy bootstrap --node-id e1 --cluster edge --locality eu/eu-1/rack-2 --delta\n"}},
		"envoy datacenter": {args: []string{"envoy", "bootstrap", "--node-id", "e1", "--cluster", "edge", "--zone", "a",
			"--datacenter", "dc2"}, wantOut: []string{"metadata:\n    datacenter: dc2\n"}},
		"grpc datacenter": {args: []string{"grpc", "bootstrap", "--node-id", "g", "--cluster", "c", "--datacenter", "dc2"},
			wantOut: []string{`"metadata": {`, `"datacenter": "dc2"`}},
		"zone overrides locality": {args: []string{"grpc", "bootstrap", "--node-id", "g", "--cluster", "c",
			"--locality", "eu/eu-1", "--zone", "eu-2"}, wantOut: []string{`"region": "eu"`, `"zone": "eu-2"`}},
		"empty node id":   {args: []string{"envoy", "bootstrap", "--cluster", "edge"}, code: 2, wantErrOut: []string{"node id is empty"}},
		"bad xds address": {args: []string{"grpc", "bootstrap", "--node-id", "g", "--cluster", "c", "--xds-address", "x"}, code: 2, wantErrOut: []string{"xds address"}},
		"bad locality":    {args: []string{"envoy", "bootstrap", "--node-id", "e", "--cluster", "c", "--locality", "a/b/c/d"}, code: 2, wantErrOut: []string{"--locality"}},
		"delta for grpc":  {args: []string{"grpc", "bootstrap", "--node-id", "g", "--cluster", "c", "--delta"}, code: 2, wantErrOut: []string{"unknown flag: --delta"}},
		"stray argument":  {args: []string{"envoy", "bootstrap", "--node-id", "e", "--cluster", "c", "extra"}, code: 2, wantErrOut: []string{"unexpected arguments"}},
		"no subcommand":   {args: []string{"envoy"}, code: 2, wantErrOut: []string{"xds-server envoy bootstrap --help"}},
		"envoy over mTLS": {args: []string{"envoy", "bootstrap", "--node-id", "e", "--cluster", "c", "--tls-ca", "/ca.pem",
			"--tls-cert", "/e.crt", "--tls-key", "/e.key", "--tls-server-name", "xds.internal"},
			wantOut: []string{"UpstreamTlsContext", "filename: /ca.pem", "filename: /e.crt", "filename: /e.key", "sni: xds.internal", "exact: xds.internal"}},
		"grpc over mTLS": {args: []string{"grpc", "bootstrap", "--node-id", "g", "--cluster", "c", "--tls-ca", "/ca.pem",
			"--tls-cert", "/g.crt", "--tls-key", "/g.key"},
			wantOut: []string{`"type": "tls"`, `"ca_certificate_file": "/ca.pem"`, `"certificate_file": "/g.crt"`, `"private_key_file": "/g.key"`}},
		"grpc server name": {args: []string{"grpc", "bootstrap", "--node-id", "g", "--cluster", "c", "--tls-ca", "/ca.pem",
			"--tls-server-name", "x"}, code: 0, wantErrOut: []string{"warning: --tls-server-name \"x\" is ignored"}},
		"key without cert": {args: []string{"envoy", "bootstrap", "--node-id", "e", "--cluster", "c", "--tls-ca", "/ca.pem",
			"--tls-key", "/e.key"}, code: 2, wantErrOut: []string{"go together"}},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, &stderr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout does not contain %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tc.wantErrOut {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not contain %q:\n%s", w, &stderr)
				}
			}
		})
	}
}

func TestBootstrapCommandOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "envoy.yaml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"envoy", "bootstrap", "--node-id", "e1", "--cluster", "edge", "--output", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 0 || !strings.Contains(string(b), "id: e1") || strings.Contains(string(b), "--output") {
		t.Errorf("stdout %q, file:\n%s", &stdout, b)
	}
}
