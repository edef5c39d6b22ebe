package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/xds-server/xds-server/envoy"
)

// Bootstrap kinds: the first word of "xds-server envoy bootstrap" and
// "xds-server grpc bootstrap".
const (
	bootstrapEnvoy = "envoy"
	bootstrapGRPC  = "grpc"
)

const envoyBootstrapUsage = `Usage: xds-server envoy bootstrap --node-id ID --cluster NAME [flags]

Prints a minimal Envoy bootstrap (YAML) for one node: ADS to xds-server
(state of the world, or incremental with --delta), clusters and listeners
over ADS, a static cluster for xds-server itself and the admin listener.
Everything else comes from xds-server. Run Envoy with: envoy -c FILE

Flags:
`

const grpcBootstrapUsage = `Usage: xds-server grpc bootstrap --node-id ID --cluster NAME [flags]

Prints the xDS bootstrap (JSON) of a proxyless gRPC client: point
GRPC_XDS_BOOTSTRAP at the file and dial xds:///<service>.

Flags:
`

// newBootstrapFlags declares the flags of a bootstrap command, in the
// order the usage lists them.
func newBootstrapFlags(kind string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("xds-server "+kind+" bootstrap", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String("node-id", "", "node id (required); unique per Envoy or client process")
	fs.String("cluster", "", "node cluster (required); nodes are grouped by it for subsetting and listener selection")
	fs.String("xds-address", "127.0.0.1:18000", "host:port of xds-server's ADS listener (a host name is resolved by DNS); several, comma-separated, for the replicas of one control plane")
	fs.String("locality", "", "node locality as region/zone[/sub_zone]")
	fs.String("region", "", "node locality region (overrides --locality)")
	fs.String("zone", "", "node locality zone (overrides --locality)")
	fs.String("sub-zone", "", "node locality sub-zone (overrides --locality)")
	fs.String("datacenter", "", "node metadata datacenter: the datacenter xds-server places the node in for locality failover (default: the first of discovery.consul.datacenters)")
	if kind == bootstrapEnvoy {
		fs.Bool("delta", false, "use incremental (delta) xDS instead of state of the world")
		fs.String("admin-address", "127.0.0.1:9901", `IP:port of Envoy's admin listener ("" for none; port 0: any free port, see envoy --admin-address-path)`)
	}
	fs.String("tls-ca", "", "connect to xds-server over TLS: PEM CA file that verifies its certificate")
	fs.String("tls-cert", "", "PEM client certificate file for mutual TLS (with --tls-key)")
	fs.String("tls-key", "", "PEM private key file of --tls-cert")
	if kind == bootstrapEnvoy {
		fs.String("tls-server-name", "", "name xds-server's certificate is verified for (and SNI); default: the host of --xds-address")
	} else {
		fs.String("tls-server-name", "", "accepted for symmetry with envoy bootstrap but ignored, with a warning: grpc-go's tls credentials verify the host of --xds-address, which xds-server's certificate must name")
	}
	fs.String("output", "", "write to this file instead of stdout")
	return fs
}

// bootstrapCommand runs "xds-server <kind> bootstrap args...". It returns
// the exit code: 0, 1 when the output cannot be written, 2 for bad input.
func bootstrapCommand(kind string, args []string, stdout, stderr io.Writer) int {
	fs := newBootstrapFlags(kind)
	usage := envoyBootstrapUsage
	if kind == bootstrapGRPC {
		usage = grpcBootstrapUsage
	}
	if slices.Contains(args, "--help") || slices.Contains(args, "-h") {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, usage)
		fs.PrintDefaults()
		return 0
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "xds-server %s bootstrap: %v%s\nUsage: xds-server %s bootstrap --node-id ID --cluster NAME [flags]   (see --help)\n",
			kind, err, flagHint(err, fs), kind)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "xds-server %s bootstrap: unexpected arguments: %v\n", kind, fs.Args())
		return 2
	}
	if name, _ := fs.GetString("tls-server-name"); kind == bootstrapGRPC && name != "" {
		fmt.Fprintf(stderr, "xds-server grpc bootstrap: warning: --tls-server-name %q is ignored: grpc-go's tls channel credentials "+
			"verify the host of --xds-address, so xds-server's certificate must name that host\n", name)
		_ = fs.Set("tls-server-name", "")
	}
	out, err := renderBootstrap(kind, fs)
	if err != nil {
		fmt.Fprintf(stderr, "xds-server %s bootstrap:\n%s\n", kind, indent(err))
		return 2
	}
	if path, _ := fs.GetString("output"); path != "" {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			fmt.Fprintf(stderr, "xds-server %s bootstrap: %v\n", kind, err)
			return 1
		}
		return 0
	}
	if _, err := stdout.Write(out); err != nil {
		return 1
	}
	return 0
}

// renderBootstrap builds the bootstrap the parsed flags ask for.
func renderBootstrap(kind string, fs *pflag.FlagSet) ([]byte, error) {
	c, err := bootstrapConfig(fs)
	if err != nil {
		return nil, err
	}
	if kind == bootstrapGRPC {
		return envoy.GRPCBootstrap(c)
	}
	b, err := envoy.Bootstrap(c)
	if err != nil {
		return nil, err
	}
	y, err := envoy.BootstrapYAML(b)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Envoy bootstrap of node %q (cluster %q), generated by\n#   %s\n"+
		"# Envoy gets everything else (clusters, endpoints, listeners, routes) from\n"+
		"# xds-server over ADS at %s.\n", c.NodeID, c.Cluster, commandLine(kind, fs), c.XDSAddress)
	return append([]byte(header), y...), nil
}

// bootstrapConfig reads the flags into an envoy.BootstrapConfig.
func bootstrapConfig(fs *pflag.FlagSet) (envoy.BootstrapConfig, error) {
	get := func(name string) string { v, _ := fs.GetString(name); return v }
	c := envoy.BootstrapConfig{NodeID: get("node-id"), Cluster: get("cluster"), XDSAddress: get("xds-address"),
		Datacenter: get("datacenter")}
	if fs.Lookup("delta") != nil {
		c.Delta, _ = fs.GetBool("delta")
		c.AdminAddress = get("admin-address")
	}
	if l := get("locality"); l != "" {
		parts := strings.Split(l, "/")
		if len(parts) > 3 {
			return c, fmt.Errorf("--locality %q: want region/zone[/sub_zone]", l)
		}
		parts = append(parts, "", "")
		c.Locality = envoy.Locality{Region: parts[0], Zone: parts[1], SubZone: parts[2]}
	}
	if t := (envoy.BootstrapTLS{CAFile: get("tls-ca"), CertFile: get("tls-cert"), KeyFile: get("tls-key"),
		ServerName: get("tls-server-name")}); t != (envoy.BootstrapTLS{}) {
		c.TLS = &t
	}
	for name, part := range map[string]*string{"region": &c.Locality.Region, "zone": &c.Locality.Zone, "sub-zone": &c.Locality.SubZone} {
		if fs.Changed(name) {
			*part = get(name)
		}
	}
	return c, nil
}

// commandLine is the command that reproduces the output: the flags that
// were set, in declaration order, without --output.
func commandLine(kind string, fs *pflag.FlagSet) string {
	words := []string{"xds-server", kind, "bootstrap"}
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Changed || f.Name == "output" {
			return
		}
		if f.Value.Type() == "bool" {
			if f.Value.String() == "true" {
				words = append(words, "--"+f.Name)
			}
			return
		}
		v := f.Value.String()
		if v == "" || strings.ContainsAny(v, " \"'$") {
			v = fmt.Sprintf("%q", v)
		}
		words = append(words, "--"+f.Name, v)
	})
	return strings.Join(words, " ")
}
