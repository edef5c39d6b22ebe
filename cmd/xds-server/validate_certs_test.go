package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/xds-server/xds-server/certs/certstest"
)

// Regression (issue 24, item 8): validate called an expired certificate
// valid. Now a pair expired or not valid yet is an error (exit 1, saying
// which), and one close to expiry a warning (exit 0).
func TestValidateCertificateValidity(t *testing.T) {
	ca := certstest.NewCA(t, "ca")
	now := time.Now()
	for name, tc := range map[string]struct {
		from, to time.Time
		code     int
		stderr   string
	}{
		"valid":         {now.Add(-time.Hour), now.Add(90 * 24 * time.Hour), 0, ""},
		"expired":       {now.Add(-48 * time.Hour), now.Add(-time.Hour), 1, "ratelimit.tls.cert_file: "},
		"not yet valid": {now.Add(time.Hour), now.Add(48 * time.Hour), 1, "certificate is not valid yet: not before"},
		"expires soon":  {now.Add(-60 * 24 * time.Hour), now.Add(3 * 24 * time.Hour), 0, "certificate expires in 7"},
	} {
		t.Run(name, func(t *testing.T) {
			certFile, keyFile := ca.LocalhostValid(t, tc.from, tc.to).Write(t, t.TempDir(), "rls")
			var stdout, stderr bytes.Buffer
			code := run([]string{"validate", "--ratelimit.tls.cert_file", certFile, "--ratelimit.tls.key_file", keyFile}, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr.String())
			}
			if name == "expired" && !strings.Contains(stderr.String(), "certificate has expired: not after") {
				t.Errorf("stderr does not say the certificate expired:\n%s", stderr.String())
			}
			if tc.code == 0 && !strings.Contains(stdout.String(), "configuration is valid") {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
}
