package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/xds-server/xds-server/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usageLine = "Usage: xds-server [serve|validate] [--config FILE] [--key value ...]   (xds-server --help lists every flag and command)"

const usage = `xds-server: an Envoy xDS control plane for Consul.

Usage:
  xds-server [serve] [flags]      run the server (the default)
  xds-server validate [flags] [--output text|json]
                                  check the configuration, report every problem, and exit
                                  (1 when invalid; warnings alone exit 0)
  xds-server ratelimit check --config FILE_OR_DIR [--merge-domains]
                                  check an envoyproxy/ratelimit config (file or directory)
  xds-server envoy bootstrap --node-id ID --cluster NAME [flags]
                                  print a minimal Envoy bootstrap (YAML) with ADS to this server
  xds-server grpc bootstrap --node-id ID --cluster NAME [flags]
                                  print a proxyless gRPC client's xDS bootstrap (JSON)
  xds-server version              print the version (also --version)
  xds-server help                 show this help (also --help, -h)

Every flag below is also a config file key and an env var: --discovery.consul.address
is discovery.consul.address in the file and XDS_SERVER_DISCOVERY_CONSUL_ADDRESS in the
environment. Precedence: flag > env > file > default. Durations need a unit (50ms, 5s, 1m).
Per-service settings (services.<name>.*, "*" for every service) and listeners are set in
the file; the README's Configuration table lists them. "xds-server <command> --help"
shows a command's own flags.

Flags:
  --config FILE
        YAML config file (flags override env, env overrides the file)
  --version
        print the version and exit
`

// commands are the first words run dispatches on, for did-you-mean hints.
var commands = []string{"serve", "validate", "ratelimit", "envoy", "grpc", "version", "help"}

// run is main without the exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help":
		printUsage(stdout)
		return 0
	case "version":
		if wantsHelp(args) {
			fmt.Fprintln(stdout, "Usage: xds-server version\n\nPrints the module version and VCS revision of this build.")
			return 0
		}
		fmt.Fprintln(stdout, version())
		return 0
	case "ratelimit":
		return rateLimitCommand(args, stdout, stderr)
	case bootstrapEnvoy, bootstrapGRPC:
		switch {
		case len(args) > 0 && args[0] == "bootstrap":
		case wantsHelp(args):
			return bootstrapCommand(cmd, []string{"--help"}, stdout, stderr)
		case len(args) == 0 || strings.HasPrefix(args[0], "-"):
			fmt.Fprintf(stderr, "xds-server %s: missing command (want: xds-server %s bootstrap --help)\n", cmd, cmd)
			return 2
		default:
			fmt.Fprintf(stderr, "xds-server %s: unknown command %q (want: xds-server %s bootstrap --help)\n", cmd, args[0], cmd)
			return 2
		}
		return bootstrapCommand(cmd, args[1:], stdout, stderr)
	case "serve", "validate":
		return serverCommand(cmd, args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "xds-server: unknown command %q%s\n%s\n", cmd, didYouMean(cmd, commands, ""), usageLine)
		return 2
	}
}

// serverCommand runs serve or validate: both read the configuration.
func serverCommand(cmd string, args []string, stdout, stderr io.Writer) int {
	if wantsHelp(args) {
		printUsage(stdout)
		if cmd == "validate" {
			fmt.Fprintln(stdout, "  --output text|json\n        validate: how problems are printed (json: an array of {key, value, reason, warning} on stdout)")
		}
		return 0
	}
	fs := pflag.NewFlagSet("xds-server "+cmd, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	path := fs.String("config", "", "")
	showVersion := fs.Bool("version", false, "")
	output := "text"
	if cmd == "validate" {
		fs.StringVar(&output, "output", "text", "")
	}
	flags := config.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "xds-server %s: %v%s\n%s\n", cmd, err, flagHint(err, fs), usageLine)
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "xds-server %s: unexpected arguments: %s\n%s\n", cmd, strings.Join(fs.Args(), " "), usageLine)
		return 2
	}
	if output != "text" && output != "json" {
		fmt.Fprintf(stderr, "xds-server validate: --output %q is not one of text, json\n", output)
		return 2
	}
	cfg, errs := config.Load(config.Sources{File: *path, Env: os.LookupEnv, Environ: os.Environ(), Flags: flags()})
	if cmd == "validate" {
		return validate(cfg, errs, output, stdout, stderr)
	}
	if len(errs) > 0 {
		printProblems(stderr, errs) // warnings are printed, and the server starts
	}
	if errs.Invalid() {
		return 1
	}
	if err := serve(cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "xds-server: %v\n", err)
		return 1
	}
	return 0
}

func wantsHelp(args []string) bool {
	return slices.Contains(args, "--help") || slices.Contains(args, "-h")
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	config.PrintFlags(w)
}

// flagHint is a did-you-mean hint for an unknown flag error: the flag of
// fs closest to the one given.
func flagHint(err error, fs *pflag.FlagSet) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return didYouMean(name, names, "--")
}

func didYouMean(name string, candidates []string, prefix string) string {
	if best := config.Closest(name, candidates); best != "" {
		return " (did you mean " + prefix + best + "?)"
	}
	return ""
}

// printProblems writes every problem of a configuration, errors first.
func printProblems(w io.Writer, errs config.Errors) {
	var bad, warn []string
	for _, e := range errs {
		if e.Warning {
			warn = append(warn, "  "+e.Error())
		} else {
			bad = append(bad, "  "+e.Error())
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(w, "xds-server: invalid configuration (%d %s):\n%s\n", len(bad), plural(len(bad), "problem"), strings.Join(bad, "\n"))
	}
	if len(warn) > 0 {
		fmt.Fprintf(w, "xds-server: %d %s:\n%s\n", len(warn), plural(len(warn), "warning"), strings.Join(warn, "\n"))
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func indent(err error) string {
	return "  " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
}
