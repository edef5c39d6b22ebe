// Command xds-server is an Envoy xDS control plane for Consul: it serves the
// services and endpoints Consul (or a static file) knows over ADS to Envoy
// and proxyless gRPC nodes.
//
// Usage:
//
//	xds-server [serve] [--config FILE] [--key value ...]
//	xds-server validate --config FILE [--key value ...]
//	xds-server ratelimit check --config FILE_OR_DIR [--merge-domains]
//	xds-server envoy bootstrap --node-id ID --cluster NAME [flags]
//	xds-server grpc bootstrap --node-id ID --cluster NAME [flags]
//
// Every configuration key is also a flag (--xds.address) and an env var
// (XDS_SERVER_XDS_ADDRESS); flags override env, env overrides the file.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `xds-server: an Envoy xDS control plane for Consul.

Usage:
  xds-server [serve] [flags]      run the server (the default)
  xds-server validate [flags]     check the configuration and exit (non-zero when invalid)
  xds-server ratelimit check --config FILE_OR_DIR [--merge-domains]
                                  check an envoyproxy/ratelimit config (file or directory)
  xds-server envoy bootstrap --node-id ID --cluster NAME [--xds-address HOST:PORT] [--delta]
        [--admin-address IP:PORT] [--locality REGION/ZONE[/SUB_ZONE]] [--output FILE]
                                  print a minimal Envoy bootstrap (YAML) with ADS to this server
  xds-server grpc bootstrap --node-id ID --cluster NAME [--xds-address HOST:PORT]
        [--locality REGION/ZONE[/SUB_ZONE]] [--output FILE]
                                  print a proxyless gRPC client's xDS bootstrap (JSON)
  xds-server help                 show this help

Every key below is also a config file key and an env var: --discovery.consul.address
is discovery.consul.address in the file and XDS_SERVER_DISCOVERY_CONSUL_ADDRESS in the
environment. Precedence: flag > env > file > default. Per-service settings
(services.<name>.lb_policy, connect_timeout, protocol, health_check.*,
outlier_detection.*, circuit_breakers.*, locality_weighted_lb, ring_hash.*,
subset_size, subsetting, weights.*, drain_window; "*" is the default for all
services) are set in the file. "xds-server envoy bootstrap --help" lists the
bootstrap flags.

Flags:
`

// run is main without the exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "ratelimit" {
		return rateLimitCommand(args[1:], stdout, stderr)
	}
	if len(args) > 0 && (args[0] == bootstrapEnvoy || args[0] == bootstrapGRPC) {
		if len(args) < 2 || args[1] != "bootstrap" {
			fmt.Fprintf(stderr, "xds-server %s: unknown command (want: xds-server %s bootstrap --help)\n", args[0], args[0])
			return 2
		}
		return bootstrapCommand(args[0], args[2:], stdout, stderr)
	}
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "validate" || args[0] == "help") {
		cmd, args = args[0], args[1:]
	}
	fs := newFlagSet("xds-server " + cmd)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if cmd == "help" || slices.Contains(args, "--help") || slices.Contains(args, "-h") {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usage)
		fs.PrintDefaults()
		return 0
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "xds-server: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	cfg, err := load(fs)
	if err != nil {
		fmt.Fprintf(stderr, "xds-server: invalid configuration:\n%s\n", indent(err))
		return 1
	}
	if cmd == "validate" {
		fmt.Fprintln(stdout, "configuration is valid")
		return 0
	}
	if err := serve(cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "xds-server: %v\n", err)
		return 1
	}
	return 0
}

func indent(err error) string {
	return "  " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
}
