package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/xds-server/xds-server/ratelimit"
)

// rateLimitCheckUsage is the help of "xds-server ratelimit check"; its
// first line is printed after a usage error.
const rateLimitCheckUsage = `usage: xds-server ratelimit check --config FILE_OR_DIR [--merge-domains] [--allow-empty]

Loads an envoyproxy/ratelimit config file, or the *.yaml and *.yml files of a
directory, as the server does (ratelimit.config), and reports every error
(exit 1) or the number of domains and rules (exit 0). A path that defines no
domain is an error unless --allow-empty (ratelimit.allow_empty). Bad usage
exits 2.

Flags:
`

// mergeDomainsEnv and allowEmptyEnv are the env vars of
// ratelimit.merge_domains and ratelimit.allow_empty, which
// --merge-domains and --allow-empty override.
const (
	mergeDomainsEnv = "XDS_SERVER_RATELIMIT_MERGE_DOMAINS"
	allowEmptyEnv   = "XDS_SERVER_RATELIMIT_ALLOW_EMPTY"
)

// rateLimitCommand runs "xds-server ratelimit args...": check is its only
// command.
func rateLimitCommand(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return rateLimitUsageError(stderr, "xds-server ratelimit: missing command (want: check)")
	case args[0] == "check":
		return rateLimitCheck(args[1:], stdout, stderr)
	case args[0] == "--help" || args[0] == "-h" || args[0] == "help":
		return rateLimitCheck([]string{"--help"}, stdout, stderr)
	default:
		return rateLimitUsageError(stderr, fmt.Sprintf("xds-server ratelimit: unknown command %q (want: check)", args[0]))
	}
}

// rateLimitUsageError prints msg and the usage line to stderr and returns
// the exit code of bad usage, 2.
func rateLimitUsageError(stderr io.Writer, msg string) int {
	usage, _, _ := strings.Cut(rateLimitCheckUsage, "\n")
	fmt.Fprintf(stderr, "%s\n%s (see --help)\n", msg, usage)
	return 2
}

// rateLimitCheck is `xds-server ratelimit check --config PATH`: it loads an
// envoyproxy/ratelimit config file or directory as the server would and
// reports every error.
func rateLimitCheck(args []string, stdout, stderr io.Writer) int {
	const name = "xds-server ratelimit check"
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	path := fs.String("config", "", "envoyproxy/ratelimit YAML file, or a directory of them (required)")
	merge := fs.Bool("merge-domains", false, "merge files that share a domain, as ratelimit.merge_domains "+
		"(envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); off: a second file for a domain is an error naming both "+
		"files (default: env "+mergeDomainsEnv+", else false)")
	allowEmpty := fs.Bool("allow-empty", false, "accept a path that defines no domain, as ratelimit.allow_empty "+
		"(default: env "+allowEmptyEnv+", else false)")
	if slices.Contains(args, "--help") || slices.Contains(args, "-h") {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, rateLimitCheckUsage)
		fs.PrintDefaults()
		return 0
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return rateLimitUsageError(stderr, fmt.Sprintf("%s: %v%s", name, err, flagHint(err, fs)))
	}
	switch {
	case fs.NArg() > 0:
		return rateLimitUsageError(stderr, fmt.Sprintf("%s: unexpected arguments: %v", name, fs.Args()))
	case *path == "":
		return rateLimitUsageError(stderr, name+": missing --config FILE_OR_DIR")
	}
	for flag, env := range map[string]string{"merge-domains": mergeDomainsEnv, "allow-empty": allowEmptyEnv} {
		if msg := boolFromEnv(fs, flag, env); msg != "" {
			return rateLimitUsageError(stderr, name+": "+msg)
		}
	}
	cfg, err := ratelimit.LoadOptions{MergeDomains: *merge, AllowEmpty: *allowEmpty}.LoadPath(*path)
	if err != nil {
		fmt.Fprintf(stderr, "xds-server: invalid rate-limit configuration:\n%s\n", indent(err))
		return 1
	}
	fmt.Fprintf(stdout, "rate-limit configuration is valid: %d domain(s), %d rule(s)\n", len(cfg.Domains()), len(cfg.Rules()))
	return 0
}

// boolFromEnv sets the boolean flag of fs from the env var env unless the
// flag was given; it returns a usage problem, or "".
func boolFromEnv(fs *pflag.FlagSet, flag, env string) string {
	v, ok := os.LookupEnv(env)
	if !ok || fs.Changed(flag) {
		return ""
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Sprintf("%s=%q is not true or false", env, v)
	}
	_ = fs.Set(flag, strconv.FormatBool(b))
	return ""
}
