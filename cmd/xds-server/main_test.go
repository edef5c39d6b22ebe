package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/xds-server/xds-server/config"
)

var update = flag.Bool("update", false, "rewrite testdata/help.golden")

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "xds-server.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadArgs loads the configuration of command-line args and the process
// environment, as serve does.
func loadArgs(t *testing.T, args ...string) (config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	path := fs.String("config", "", "")
	flags := config.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, errs := config.Load(config.Sources{File: *path, Env: os.LookupEnv, Flags: flags()})
	return cfg, errs.Err()
}

// TestCommandLine runs the commands the way a user types them and checks
// the exit code and the first line of stderr (or a piece of stdout).
func TestCommandLine(t *testing.T) {
	for name, tc := range map[string]struct {
		args      []string
		code      int
		stderr    string // first line, exactly
		stdoutHas string
		stderrHas string
	}{
		"unknown flag, close to a key": {args: []string{"--xds.adress", "1:2"}, code: 2,
			stderr: "xds-server serve: unknown flag: --xds.adress (did you mean --xds.address?)"},
		"unknown flag, nothing close": {args: []string{"--frobnicate"}, code: 2,
			stderr: "xds-server serve: unknown flag: --frobnicate"},
		"unknown flag of validate": {args: []string{"validate", "--xds.debounse=1s"}, code: 2,
			stderr: "xds-server validate: unknown flag: --xds.debounse (did you mean --xds.debounce?)"},
		"usage line after the error": {args: []string{"--xds.adress", "1:2"}, code: 2, stderrHas: "\nUsage: xds-server [serve|validate]"},
		"unknown command":            {args: []string{"serv"}, code: 2, stderr: `xds-server: unknown command "serv" (did you mean serve?)`},
		"version":                    {args: []string{"version"}, stdoutHas: "xds-server "},
		"--version":                  {args: []string{"--version"}, stdoutHas: "xds-server "},
		"help":                       {args: []string{"help"}, stdoutHas: "--xds.address string (default :18000)"},
		"--help":                     {args: []string{"--help"}, stdoutHas: "Usage:"},
		"serve --help":               {args: []string{"serve", "--help"}, stdoutHas: "--log.format"},
		"validate --help":            {args: []string{"validate", "-h"}, stdoutHas: "--output text|json"},
		"version --help":             {args: []string{"version", "--help"}, stdoutHas: "Usage: xds-server version"},
		"ratelimit check --help":     {args: []string{"ratelimit", "check", "--help"}, stdoutHas: "--merge-domains"},
		"ratelimit check bad flag": {args: []string{"ratelimit", "check", "--config", "x", "--bogus"}, code: 2,
			stderr: "xds-server ratelimit check: unknown flag: --bogus"},
		"envoy --help": {args: []string{"envoy", "--help"}, stdoutHas: "--node-id"},
		"grpc -h":      {args: []string{"grpc", "-h"}, stdoutHas: "--node-id"},
		"bootstrap flag typo": {args: []string{"envoy", "bootstrap", "--node-di", "x"}, code: 2,
			stderr: "xds-server envoy bootstrap: unknown flag: --node-di (did you mean --node-id?)"},
		"ratelimit check flag typo": {args: []string{"ratelimit", "check", "--merge-domain"}, code: 2,
			stderr: "xds-server ratelimit check: unknown flag: --merge-domain (did you mean --merge-domains?)"},
		"envoy bootstrap --help": {args: []string{"envoy", "bootstrap", "--help"}, stdoutHas: "--node-id"},
		"grpc bootstrap --help":  {args: []string{"grpc", "bootstrap", "--help"}, stdoutHas: "--node-id"},
		"unit-less duration flag": {args: []string{"validate", "--xds.debounce", "50"}, code: 1,
			stderr: "xds-server: invalid configuration (1 problem):", stderrHas: "  xds.debounce: 50: a duration needs a unit (like 50ms, 5s or 1m)"},
		"bool flag alone means true": {args: []string{"validate", "--ratelimit.headers"}, stdoutHas: "configuration is valid"},
		"bad bool flag": {args: []string{"validate", "--ratelimit.headers=maybe"}, code: 1,
			stderrHas: "ratelimit.headers: maybe: is not true or false"},
		"out of range": {args: []string{"validate", "--xds.max_streams", "5000000000"}, code: 1,
			stderrHas: "xds.max_streams: 5000000000: is not in [0, 4294967295]"},
		"secret never printed": {args: []string{"validate", "--discovery.consul.token", "[s3cret", "--discovery.source", "nope"}, code: 1,
			stderrHas: "discovery.source: nope: is not one of static, consul"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, &stderr)
			}
			first, _, _ := strings.Cut(stderr.String(), "\n")
			if tc.stderr != "" && first != tc.stderr {
				t.Errorf("stderr's first line\n got %q\nwant %q", first, tc.stderr)
			}
			if tc.stderrHas != "" && !strings.Contains(stderr.String(), tc.stderrHas) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderrHas, &stderr)
			}
			if tc.stdoutHas != "" && !strings.Contains(stdout.String(), tc.stdoutHas) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdoutHas, &stdout)
			}
			if strings.Contains(stdout.String()+stderr.String(), "s3cret") {
				t.Error("a secret was printed")
			}
		})
	}
}

// TestHelpGolden keeps --help as reviewed in testdata/help.golden
// (go test ./cmd/xds-server -run TestHelpGolden -update rewrites it).
func TestHelpGolden(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	golden := filepath.Join("testdata", "help.golden")
	if *update {
		if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(want) {
		t.Errorf("--help differs from %s (run with -update after reviewing):\n%s", golden, &stdout)
	}
	for _, key := range config.FlagKeys() {
		if !strings.Contains(stdout.String(), "  --"+key.Name) {
			t.Errorf("--help does not list --%s", key.Name)
		}
	}
}

// TestValidateReportsEverything: one run lists an unknown key, a
// unit-less duration and a route to an unknown service; --output json
// prints them as an array.
func TestValidateReportsEverything(t *testing.T) {
	file := writeConfig(t, `
xds: { debounce: 50, adress: ":1" }
listeners:
  - name: ingress
    address: 0.0.0.0:10000
    routes: [{ prefix: /, service: nope }]
`)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--config", file}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	want := "xds-server: invalid configuration (3 problems):\n" +
		"  listeners[0].routes[0].service: nope: is not a known service (known: echo, greeter)\n" +
		"  xds.adress: unknown key (did you mean xds.address?)\n" +
		"  xds.debounce: 50: a duration needs a unit (like 50ms, 5s or 1m)\n"
	if stderr.String() != want {
		t.Errorf("stderr\n got %q\nwant %q", stderr.String(), want)
	}
	stdout.Reset()
	if code := run([]string{"validate", "--config", file, "--output", "json"}, &stdout, &stderr); code != 1 {
		t.Fatalf("json: exit %d, want 1", code)
	}
	var got []config.FieldError
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("--output json: %v\n%s", err, &stdout)
	}
	if len(got) != 3 || got[2] != (config.FieldError{Key: "xds.debounce", Value: "50", Reason: "a duration needs a unit (like 50ms, 5s or 1m)"}) {
		t.Errorf("--output json: %+v", got)
	}
}

// TestBinaryExitCodes runs the built binary: exit codes and stderr as a
// shell sees them.
func TestBinaryExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "xds-server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a piece of it
		stderr string // a piece of it
	}{
		{[]string{"--xds.adress", "1:2"}, 2, "", "unknown flag: --xds.adress (did you mean --xds.address?)\nUsage:"},
		{[]string{"--version"}, 0, "xds-server ", ""},
		{[]string{"version"}, 0, "xds-server ", ""},
		{[]string{"ratelimit", "check", "--help"}, 0, "--merge-domains", ""},
		{[]string{"ratelimit", "check", "--config", "x", "--bogus"}, 2, "", "unknown flag: --bogus"},
		{[]string{"validate", "--xds.debounce", "50"}, 1, "", "xds.debounce: 50: a duration needs a unit"},
	} {
		cmd := exec.Command(bin, tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("xds-server %s: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)",
				strings.Join(tc.args, " "), code, tc.code, &stdout, tc.stdout, &stderr, tc.stderr)
		}
	}
}

func TestValidateCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "--config", writeConfig(t, "xds: { address: ':18000' }\n")}, &out, &errOut); code != 0 {
		t.Fatalf("valid config: exit %d, stderr %s", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code := run([]string{"validate", "--config", writeConfig(t, "discovery: { sorce: consul }\n")}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "discovery.sorce: unknown key") {
		t.Fatalf("invalid config: exit %d, stderr %q", code, errOut.String())
	}
}

func TestRateLimitCheck(t *testing.T) {
	dir := t.TempDir()
	good := dir + "/good.yaml"
	bad := dir + "/bad.yaml"
	write := func(p, body string) {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(good, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 10 }\n")
	write(bad, "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: fortnight, requests_per_unit: 10 }\n")
	var out, errOut bytes.Buffer
	if code := run([]string{"ratelimit", "check", "--config", good}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "1 domain(s), 1 rule(s)") {
		t.Errorf("good config: exit %d, %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"ratelimit", "check", "--config", bad}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "fortnight") {
		t.Errorf("bad config: exit %d, %q; want 1 naming the unit", code, errOut.String())
	}
	if code := run([]string{"validate", "--ratelimit.config", bad}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "ratelimit.config") {
		t.Errorf("validate with a bad rate-limit config: exit %d, %q", code, errOut.String())
	}
}
