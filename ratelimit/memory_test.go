package ratelimit

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

func decideOne(t *testing.T, m *Memory, now time.Time, c Check) Result {
	t.Helper()
	res, err := m.Decide(context.Background(), now, []Check{c})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func TestMemoryBounded(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 4, MaxKeys: 64})
	if err != nil {
		t.Fatal(err)
	}
	l := Limit{FixedWindow, 10, Hour, 0}
	for i := range 1000 {
		decideOne(t, m, t0, Check{Key: "k" + strconv.Itoa(i), Limit: l, Cap: 10, Hits: 1})
	}
	if n := m.Len(); n > 64 {
		t.Errorf("%d keys held, want at most 64", n)
	}
}

// A full shard drops expired keys before live ones.
func TestMemoryEvictsExpiredFirst(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Shards: 1, MaxKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	hour := Limit{FixedWindow, 10, Hour, 0}
	sec := Limit{FixedWindow, 10, Second, 0}
	decideOne(t, m, t0, Check{Key: "long", Limit: hour, Cap: 10, Hits: 5})
	for i := range 3 {
		decideOne(t, m, t0, Check{Key: "short" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
	}
	later := t0.Add(2 * time.Second)
	for i := range 3 {
		decideOne(t, m, later, Check{Key: "new" + strconv.Itoa(i), Limit: sec, Cap: 10, Hits: 1})
	}
	if r := decideOne(t, m, later, Check{Key: "long", Limit: hour, Cap: 10}); r.Remaining != 5 {
		t.Errorf("the live key was evicted: remaining %d, want 5", r.Remaining)
	}
	if n := m.Len(); n > 4 {
		t.Errorf("%d keys held, want at most 4", n)
	}
}

func TestMemoryLooksDoNotInsert(t *testing.T) {
	m, _ := NewMemory(MemoryConfig{})
	decideOne(t, m, t0, Check{Key: "k", Limit: Limit{FixedWindow, 1, Second, 0}, Cap: 1})
	if n := m.Len(); n != 0 {
		t.Errorf("a look inserted %d keys", n)
	}
}

func TestMemoryConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  MemoryConfig
		want string
	}{
		"defaults":          {MemoryConfig{}, ""},
		"explicit":          {MemoryConfig{Shards: 8, MaxKeys: 100}, ""},
		"not a power of 2":  {MemoryConfig{Shards: 6}, "shards 6 is not a power of two"},
		"negative shards":   {MemoryConfig{Shards: -1}, "shards -1"},
		"too many shards":   {MemoryConfig{Shards: 1 << 17}, "not a power of two in [1, 65536]"},
		"fewer keys":        {MemoryConfig{Shards: 8, MaxKeys: 4}, "max keys 4 is below the shards 8"},
		"negative max keys": {MemoryConfig{MaxKeys: -1}, "max keys -1"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := NewMemory(tc.cfg); err == nil {
				t.Error("NewMemory accepted the config")
			}
		})
	}
}

func TestOverLimitCache(t *testing.T) {
	c := newOverLimitCache(overLimitShards) // one key per shard
	l := Limit{FixedWindow, 10, Second, 0}
	now := t0.UnixNano()
	if _, ok := c.get("a", l, now); ok {
		t.Fatal("hit in an empty cache")
	}
	c.put("a", l, now+int64(time.Second), now)
	if d, ok := c.get("a", l, now+int64(400*time.Millisecond)); !ok || d != 600*time.Millisecond {
		t.Errorf("get = %v, %v; want 600ms, true", d, ok)
	}
	if _, ok := c.get("a", Limit{FixedWindow, 20, Second, 0}, now); ok {
		t.Error("hit for another limit")
	}
	if _, ok := c.get("a", l, now+int64(time.Second)); ok {
		t.Error("hit after the entry expired")
	}
	if n := c.size.Load(); n != 0 {
		t.Errorf("size %d after expiry, want 0", n)
	}
	for i := range 100 {
		c.put("k"+strconv.Itoa(i), l, now+int64(time.Second), now)
	}
	if n := c.size.Load(); n > overLimitShards {
		t.Errorf("size %d, want at most %d", n, overLimitShards)
	}
	c.clear()
	if n := c.size.Load(); n != 0 {
		t.Errorf("size %d after clear", n)
	}
}
