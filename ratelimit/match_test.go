package ratelimit

import (
	"strings"
	"testing"
)

const matchYAML = `
domain: d
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: path
    value: /api/*
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 7}
  - key: path
    value: /api/v1/*/items
    rate_limit: {unit: minute, requests_per_unit: 8}
  - key: path
    value: /api/*/items
    rate_limit: {unit: minute, requests_per_unit: 9}
  - key: path
    value: /exact
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: files
    value: "*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 20}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: v2m
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: placeholder
    value: p
  - key: tokens
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket, burst: 50}
`

func TestMatch(t *testing.T) {
	c := mustLoad(t, matchYAML)
	for name, tc := range map[string]struct {
		domain   string
		entries  []Entry
		override *Override
		ok       bool
		want     Match // Rule is compared by key (ruleKey)
		ruleKey  string
	}{
		"unknown domain": {domain: "x", entries: []Entry{{"remote_address", "1"}}},
		"default value": {domain: "d", entries: []Entry{{"remote_address", "1.2.3.4"}}, ok: true, ruleKey: "d.remote_address",
			want: Match{Limit: Limit{FixedWindow, 10, Second, 0}, StatKey: "d.remote_address", StoreKey: "d_remote_address_1.2.3.4_"}},
		"exact value wins over default": {domain: "d", entries: []Entry{{"remote_address", "50.0.0.5"}}, ok: true, ruleKey: "d.remote_address_50.0.0.5",
			want: Match{Limit: Limit{FixedWindow, 0, Second, 0}, StatKey: "d.remote_address_50.0.0.5", StoreKey: "d_remote_address_50.0.0.5_"}},
		"nested": {domain: "d", entries: []Entry{{"message_type", "marketing"}, {"to_number", "206"}}, ok: true,
			ruleKey: "d.message_type_marketing.to_number",
			want: Match{Limit: Limit{FixedWindow, 5, Day, 0}, StatKey: "d.message_type_marketing.to_number",
				StoreKey: "d_message_type_marketing_to_number_206_"}},
		"request deeper than config":    {domain: "d", entries: []Entry{{"remote_address", "1"}, {"x", "y"}}},
		"request shallower than config": {domain: "d", entries: []Entry{{"message_type", "marketing"}}},
		"placeholder without a limit":   {domain: "d", entries: []Entry{{"placeholder", "p"}}},
		"no such key":                   {domain: "d", entries: []Entry{{"nope", "1"}}},
		"prefix wildcard then nested": {domain: "d", entries: []Entry{{"path", "/api/x"}, {"user", "u"}}, ok: true,
			ruleKey: "d.path_/api/*.user",
			want:    Match{Limit: Limit{FixedWindow, 7, Minute, 0}, StatKey: "d.path_/api/*.user", StoreKey: "d_path_/api/x_user_u_"}},
		"first wildcard in config order wins": {domain: "d", entries: []Entry{{"path", "/api/v1/x/items"}, {"user", "u"}}, ok: true,
			ruleKey: "d.path_/api/*.user",
			want:    Match{Limit: Limit{FixedWindow, 7, Minute, 0}, StatKey: "d.path_/api/*.user", StoreKey: "d_path_/api/v1/x/items_user_u_"}},
		"wildcard in the middle": {domain: "d", entries: []Entry{{"path", "/api/v1/x/items"}}, ok: false},
		"exact beats wildcard": {domain: "d", entries: []Entry{{"path", "/exact"}}, ok: true, ruleKey: "d.path_/exact",
			want: Match{Limit: Limit{FixedWindow, 1, Minute, 0}, StatKey: "d.path_/exact", StoreKey: "d_path_/exact_"}},
		"share_threshold shares one bucket": {domain: "d", entries: []Entry{{"files", "a.txt"}}, ok: true, ruleKey: "d.files_*",
			want: Match{Limit: Limit{FixedWindow, 20, Hour, 0}, StatKey: "d.files_*", StoreKey: "d_files_*_"}},
		"detailed_metric keys metrics by value": {domain: "d", entries: []Entry{{"detailed", "abc"}}, ok: true, ruleKey: "d.detailed",
			want: Match{Limit: Limit{FixedWindow, 10, Minute, 0}, StatKey: "d.detailed_abc", StoreKey: "d_detailed_abc_"}},
		"value_to_metric keys metrics by value": {domain: "d", entries: []Entry{{"v2m", "abc"}}, ok: true, ruleKey: "d.v2m",
			want: Match{Limit: Limit{FixedWindow, 10, Minute, 0}, StatKey: "d.v2m_abc", StoreKey: "d_v2m_abc_"}},
		"override of a matched rule keeps its algorithm": {domain: "d", entries: []Entry{{"tokens", "t"}},
			override: &Override{Requests: 3, Unit: Minute}, ok: true, ruleKey: "d.tokens",
			want: Match{Limit: Limit{TokenBucket, 3, Minute, 3}, Override: true, StatKey: "d.tokens_t", StoreKey: "d_tokens_t_"}},
		"override applies to any descriptor of a known domain": {domain: "d", entries: []Entry{{"nope", "1"}, {"k", ""}},
			override: &Override{Requests: 3, Unit: Hour}, ok: true,
			want: Match{Limit: Limit{FixedWindow, 3, Hour, 0}, Override: true, StatKey: "d.nope_1.k", StoreKey: "d_nope_1_k__"}},
		"override of an unknown domain": {domain: "x", entries: []Entry{{"a", "b"}}, override: &Override{Requests: 3, Unit: Hour}},
		"no entries":                    {domain: "d"},
	} {
		t.Run(name, func(t *testing.T) {
			m, ok := c.Match(tc.domain, tc.entries, tc.override)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (match %+v)", ok, tc.ok, m)
			}
			if !ok {
				return
			}
			gotKey := ""
			if m.Rule != nil {
				gotKey = m.Rule.Key
			}
			if gotKey != tc.ruleKey {
				t.Errorf("rule = %q, want %q", gotKey, tc.ruleKey)
			}
			m.Rule = nil
			if m != tc.want {
				t.Errorf("match = %+v,\nwant    %+v", m, tc.want)
			}
		})
	}
}

func TestGlobMatch(t *testing.T) {
	for name, tc := range map[string]struct {
		pattern, value string
		want           bool
	}{
		"star matches empty":       {"*", "", true},
		"star matches anything":    {"*", "abc", true},
		"prefix":                   {"foo*", "foobar", true},
		"prefix alone":             {"foo*", "foo", true},
		"prefix mismatch":          {"foo*", "fo", false},
		"suffix":                   {"*.txt", "a.txt", true},
		"suffix mismatch":          {"*.txt", "a.txd", false},
		"middle":                   {"a*c", "abbbc", true},
		"middle overlap":           {"ab*bc", "abc", false},
		"two stars":                {"a*b*c", "axxbyyc", true},
		"two stars out of order":   {"a*b*c", "axxcyyb", false},
		"literal between":          {"/api/*/items", "/api/v1/items", true},
		"literal between mismatch": {"/api/*/items", "/api/v1/item", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := globMatch(compileGlob(tc.pattern), tc.value); got != tc.want {
				t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.value, got, tc.want)
			}
		})
	}
}

func FuzzGlobMatch(f *testing.F) {
	f.Add("a*b", "axb")
	f.Add("*", "")
	// The input that timed out the plain recursive reference: every star
	// may take any run of a's, and no split ends in b.
	f.Add(strings.Repeat("*a", 20)+"b", strings.Repeat("a", 100))
	f.Fuzz(func(t *testing.T, pattern, value string) {
		if !strings.Contains(pattern, "*") || len(pattern) > 256 || len(value) > 4096 {
			return // the memoized reference costs len(pattern)*len(value)
		}
		got := globMatch(compileGlob(pattern), value)
		if got != naiveGlob(pattern, value) {
			t.Errorf("globMatch(%q, %q) = %v, naive says otherwise", pattern, value, got)
		}
	})
}

// naiveGlob is the reference matcher for '*' patterns: the textbook
// recursion, memoized on (pattern offset, value offset), so that it
// costs at most len(p)*len(s) steps (the plain recursion is exponential
// in the stars, which made FuzzGlobMatch time out in the reference, not
// in globMatch).
func naiveGlob(p, s string) bool {
	memo := make(map[[2]int]bool)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if v, ok := memo[[2]int{i, j}]; ok {
			return v
		}
		var v bool
		switch {
		case i == len(p):
			v = j == len(s)
		case p[i] == '*':
			v = match(i+1, j) || (j < len(s) && match(i, j+1))
		default:
			v = j < len(s) && p[i] == s[j] && match(i+1, j+1)
		}
		memo[[2]int{i, j}] = v
		return v
	}
	return match(0, 0)
}
