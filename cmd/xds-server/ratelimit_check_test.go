package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ratelimit commands, through run: exit code, the first line of
// stderr (exact) and a part of stdout.
func TestRateLimitCommand(t *testing.T) {
	dir := dupDomainDir(t)
	usage := "usage: xds-server ratelimit check --config FILE_OR_DIR [--merge-domains] [--allow-empty] (see --help)"
	dup := `  domain "d" in ` + filepath.Join(dir, "b.yaml") + " is already defined in " + filepath.Join(dir, "a.yaml") +
		" (set ratelimit.merge_domains: true to merge)"
	valid := "rate-limit configuration is valid: 1 domain(s), 2 rule(s)\n"
	empty := t.TempDir()
	noDomain := "  ratelimit: empty config: " + empty + " has no *.yaml or *.yml file (set ratelimit.allow_empty: true to serve no domains)"
	for name, tc := range map[string]struct {
		args   []string
		env    string // XDS_SERVER_RATELIMIT_MERGE_DOMAINS; "" = unset
		code   int
		stderr []string // its first lines, exact
		stdout string   // a part of stdout
	}{
		"--help":               {args: []string{"ratelimit", "check", "--help"}, stdout: "--merge-domains"},
		"-h":                   {args: []string{"ratelimit", "check", "-h"}, stdout: "--config string"},
		"ratelimit --help":     {args: []string{"ratelimit", "--help"}, stdout: "usage: xds-server ratelimit check"},
		"unknown flag":         {args: []string{"ratelimit", "check", "--bogus"}, code: 2, stderr: []string{"xds-server ratelimit check: unknown flag: --bogus", usage}},
		"unknown short flag":   {args: []string{"ratelimit", "check", "-x"}, code: 2, stderr: []string{"xds-server ratelimit check: unknown shorthand flag: 'x' in -x", usage}},
		"missing --config":     {args: []string{"ratelimit", "check"}, code: 2, stderr: []string{"xds-server ratelimit check: missing --config FILE_OR_DIR", usage}},
		"extra argument":       {args: []string{"ratelimit", "check", "--config", dir, "extra"}, code: 2, stderr: []string{"xds-server ratelimit check: unexpected arguments: [extra]", usage}},
		"no command":           {args: []string{"ratelimit"}, code: 2, stderr: []string{"xds-server ratelimit: missing command (want: check)", usage}},
		"unknown command":      {args: []string{"ratelimit", "bogus"}, code: 2, stderr: []string{`xds-server ratelimit: unknown command "bogus" (want: check)`, usage}},
		"duplicate domain":     {args: []string{"ratelimit", "check", "--config", dir}, code: 1, stderr: []string{"xds-server: invalid rate-limit configuration:", "  ratelimit: invalid config:", dup}},
		"--merge-domains":      {args: []string{"ratelimit", "check", "--config", dir, "--merge-domains"}, stdout: valid},
		"env merges":           {args: []string{"ratelimit", "check", "--config", dir}, env: "true", stdout: valid},
		"flag overrides env":   {args: []string{"ratelimit", "check", "--config", dir, "--merge-domains=false"}, env: "true", code: 1, stderr: []string{"xds-server: invalid rate-limit configuration:"}},
		"env false":            {args: []string{"ratelimit", "check", "--config", dir}, env: "false", code: 1, stderr: []string{"xds-server: invalid rate-limit configuration:"}},
		"env not a bool":       {args: []string{"ratelimit", "check", "--config", dir}, env: "maybe", code: 2, stderr: []string{`xds-server ratelimit check: XDS_SERVER_RATELIMIT_MERGE_DOMAINS="maybe" is not true or false`, usage}},
		"empty directory":      {args: []string{"ratelimit", "check", "--config", empty}, code: 1, stderr: []string{"xds-server: invalid rate-limit configuration:", noDomain}},
		"--allow-empty":        {args: []string{"ratelimit", "check", "--config", empty, "--allow-empty"}, stdout: "0 domain(s), 0 rule(s)"},
		"one file, no merging": {args: []string{"ratelimit", "check", "--config", filepath.Join(dir, "a.yaml")}, stdout: "1 domain(s), 1 rule(s)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(mergeDomainsEnv, tc.env) // restored after the test
			t.Setenv(allowEmptyEnv, "")
			os.Unsetenv(allowEmptyEnv)
			if tc.env == "" {
				os.Unsetenv(mergeDomainsEnv)
			}
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, &stdout, &stderr)
			}
			lines := strings.Split(stderr.String(), "\n")
			for i, want := range tc.stderr {
				if i >= len(lines) || lines[i] != want {
					t.Errorf("stderr:\n%s\nwant line %d %q", &stderr, i+1, want)
					break
				}
			}
			if len(tc.stderr) == 0 && stderr.Len() > 0 {
				t.Errorf("stderr:\n%s\nwant none", &stderr)
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout:\n%s\nwant it to contain %q", &stdout, tc.stdout)
			}
		})
	}
}
