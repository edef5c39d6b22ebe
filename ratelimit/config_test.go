package ratelimit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mustLoad loads YAML documents named f0.yaml, f1.yaml, ... or fails.
func mustLoad(t testing.TB, docs ...string) *Config {
	t.Helper()
	c, err := Load(files(docs...)...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func files(docs ...string) []File {
	fs := make([]File, len(docs))
	for i, d := range docs {
		fs[i] = File{Name: "f" + string(rune('0'+i)) + ".yaml", Data: []byte(d)}
	}
	return fs
}

// The examples of envoyproxy/ratelimit's README load unchanged.
func TestLoadEnvoyExamples(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want []string // rule keys
	}{
		"example 1: values": {`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`, []string{"mongo_cps.database_default", "mongo_cps.database_users"}},
		"example 2: nested": {`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`, []string{"messaging.message_type_marketing.to_number", "messaging.to_number"}},
		"example 5: unlimited, example 6: shadow mode": {`
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: SECOND
        shadow_mode: true
`, []string{"internal.ldap", "internal.service.user_user-a"}},
		"example 7: replaces": {`
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`, []string{"example7.key_1_value_1.user_bkthomps", "example7.key_2_value_2.user_bkthomps"}},
		"example 8 and 9: detailed_metric, value_to_metric, wildcards, share_threshold": {`
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: key1
    value: value*
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: files
    value: "*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 20}
`, []string{"example8.files_*", "example8.key1", "example8.key1_value*"}},
		"extensions: algorithms, burst, criticality": {`
domain: ext
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_log, criticality: true}
  - key: c
    rate_limit:
      unit: week
      requests_per_unit: 100
      algorithm: sliding_window
      criticality:
        shares: {SHEDDABLE: 0.5, sheddable_plus: 0.6}
        limits: {CRITICAL: 95}
  - key: d
    rate_limit: {unit: year, requests_per_unit: 10, algorithm: leaky_bucket, criticality: false}
`, []string{"ext.a", "ext.b", "ext.c", "ext.d"}},
		"empty descriptors": {"domain: empty\n", nil},
	} {
		t.Run(name, func(t *testing.T) {
			c := mustLoad(t, tc.yaml)
			var got []string
			for _, r := range c.Rules() {
				got = append(got, r.Key)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("rule keys = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadExtensions(t *testing.T) {
	c := mustLoad(t, `
domain: ext
descriptors:
  - key: t
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket}
  - key: l
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, burst: 3}
  - key: c
    rate_limit:
      unit: second
      requests_per_unit: 100
      criticality: {shares: {SHEDDABLE: 0.5}, limits: {CRITICAL: 95}}
`)
	byKey := map[string]*Rule{}
	for _, r := range c.Rules() {
		byKey[r.Key] = r
	}
	if got := byKey["ext.t"].Limit; got != (Limit{TokenBucket, 10, Second, 10}) {
		t.Errorf("token bucket limit = %+v, want default burst 10", got)
	}
	if got := byKey["ext.l"].Limit; got != (Limit{LeakyBucket, 10, Second, 3}) {
		t.Errorf("leaky bucket limit = %+v, want burst 3", got)
	}
	a := byKey["ext.c"].Admission
	var caps []uint32
	for cl := Sheddable; cl <= CriticalPlus; cl++ {
		caps = append(caps, a.Cap(cl, 100))
	}
	if want := []uint32{50, 80, 95, 100}; !slices.Equal(caps, want) {
		t.Errorf("caps = %v, want %v", caps, want)
	}
}

// Invalid configurations are refused with the file, line, YAML path and
// reason.
func TestLoadErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		docs []string
		want []string // substrings of the error, in any order
	}{
		"syntax":             {[]string{"domain: [x"}, []string{"f0.yaml: yaml:"}},
		"empty file":         {[]string{""}, []string{"f0.yaml: empty file"}},
		"missing domain":     {[]string{"descriptors: []"}, []string{"f0.yaml:1:1: domain: missing or empty domain"}},
		"unknown top key":    {[]string{"domain: d\nfoo: 1"}, []string{`f0.yaml:2:1: (top level): unknown key "foo"`}},
		"duplicate yaml key": {[]string{"domain: d\ndomain: e"}, []string{`duplicate key "domain" (first at line 1)`}},
		"missing key": {[]string{"domain: d\ndescriptors:\n  - value: v"},
			[]string{"f0.yaml:3:5: descriptors[0]: missing or empty key"}},
		"bad unit": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}"},
			[]string{`descriptors[0].rate_limit.unit: invalid unit "fortnight"`}},
		"missing unit": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}"},
			[]string{"descriptors[0].rate_limit: missing unit"}},
		"unlimited with a unit": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second, requests_per_unit: 1}"},
			[]string{"rate_limit.unit: an unlimited rate_limit takes no unit"}},
		"unlimited with an algorithm": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, algorithm: token_bucket}"},
			[]string{"rate_limit.algorithm: an unlimited rate_limit takes no algorithm"}},
		"replaces itself": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: n}]}"},
			[]string{`descriptors[0].rate_limit.replaces[0]: a rate_limit cannot replace itself (name "n")`}},
		"empty replaces name": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: ''}]}"},
			[]string{"replaces[0]: missing or empty name"}},
		"duplicate descriptor": {[]string{"domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v"},
			[]string{`f0.yaml:5:5: descriptors[1]: duplicate descriptor key "k" value "v" (first defined at f0.yaml:3)`}},
		"misplaced shadow_mode": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, shadow_mode: true}"},
			[]string{`key "shadow_mode" does not belong here: it goes in a descriptor`}},
		"unknown descriptor key": {[]string{"domain: d\ndescriptors:\n  - key: k\n    limit: 3"},
			[]string{`descriptors[0]: unknown key "limit"`}},
		"negative requests": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}"},
			[]string{`requests_per_unit: want an integer in [0, 4294967295], got "-1"`}},
		"bad bool": {[]string{"domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe"},
			[]string{`descriptors[0].shadow_mode: want true or false, got "maybe"`}},
		"bad algorithm": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: magic}"},
			[]string{`rate_limit.algorithm: invalid algorithm "magic"`}},
		"burst on a window": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 3}"},
			[]string{"burst applies to token_bucket and leaky_bucket, not fixed_window"}},
		"zero burst": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: 0}"},
			[]string{"burst must be at least 1"}},
		"huge sliding log": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1000000, algorithm: sliding_log}"},
			[]string{"exceeds 100000 (use sliding_window)"}},
		"share_threshold without wildcard": {[]string{"domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true"},
			[]string{`share_threshold needs a wildcard value (with '*'), got value "v"`}},
		"decreasing shares": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10, criticality: {shares: {CRITICAL: 0.5}}}"},
			[]string{"rate_limit.criticality: share of CRITICAL 0.5 is below the share of SHEDDABLE_PLUS 0.8"}},
		"unknown class": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10, criticality: {shares: {VIP: 1}}}"},
			[]string{`unknown criticality "VIP"`}},
		"class limit above capacity": {[]string{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10, criticality: {limits: {SHEDDABLE: 11}}}"},
			[]string{"limit of SHEDDABLE 11 exceeds the capacity 10"}},
		"descriptors not a list": {[]string{"domain: d\ndescriptors: {key: k}"},
			[]string{"descriptors: want a list of descriptors, got a mapping"}},
		"several errors are all reported": {[]string{"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: x}\n  - value: v\n  - key: b\n    foo: 1"},
			[]string{`invalid unit "x"`, "descriptors[1]: missing or empty key", `descriptors[2]: unknown key "foo"`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(files(tc.docs...)...)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadPath(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}")
	write("b.yml", "domain: b\n")
	write("notes.txt", "not yaml: [")
	write(".hidden.yaml", "not yaml: [")
	c, err := LoadPath(dir)
	if err != nil {
		t.Fatalf("LoadPath(dir): %v", err)
	}
	if got := strings.Join(c.Domains(), ","); got != "a,b" {
		t.Errorf("domains = %s, want a,b", got)
	}
	if c, err = LoadPath(filepath.Join(dir, "a.yaml")); err != nil || len(c.Domains()) != 1 {
		t.Errorf("LoadPath(file) = %v, %v", c.Domains(), err)
	}
	if _, err := LoadPath(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadPath(missing) succeeded")
	}
	write("c.yaml", "domain: c\ndescriptors:\n  - key: k\n    rate_limit: {unit: lightyear}")
	_, err = LoadPath(dir)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "c.yaml")+":4:") {
		t.Errorf("LoadPath error %v does not name c.yaml and its line", err)
	}
}
