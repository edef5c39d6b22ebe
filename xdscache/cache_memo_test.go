package xdscache

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// TestResourceMemoBuildsOnce: streams that miss the same resources at once
// (the first nodes of a connect storm) get one slice, built once, not a
// slice each: the codec shares a response's encoding by the slice's
// identity.
func TestResourceMemoBuildsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var memo resourceMemo[int]
		names, items := []string{"a", "b"}, map[string]types.ResourceWithTTL{}
		release := make(chan struct{})
		var builds atomic.Int32
		build := func() ([]int, error) {
			builds.Add(1)
			<-release
			return []int{1, 2}, nil
		}
		const streams = 8
		got := make([][]int, streams)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() {
				v, err := memo.of(names, items, "url", build)
				if err != nil {
					t.Error(err)
				}
				got[i] = v
			})
		}
		synctest.Wait() // every stream is in of: building or waiting for the build
		if n := builds.Load(); n != 1 {
			t.Errorf("%d builds of one key missed by %d streams at once, want 1", n, streams)
		}
		close(release)
		wg.Wait()
		for i, v := range got {
			if unsafe.SliceData(v) != unsafe.SliceData(got[0]) {
				t.Errorf("stream %d got a slice of its own", i)
			}
		}
		if v, _ := memo.of(names, items, "url", build); unsafe.SliceData(v) != unsafe.SliceData(got[0]) {
			t.Error("a later stream got another slice: the built one was not kept")
		}
		if v, _ := memo.of(names, items, "other-url", func() ([]int, error) { return []int{1, 2}, nil }); unsafe.SliceData(v) == unsafe.SliceData(got[0]) {
			t.Error("another type URL got the same slice")
		}
	})
}

// TestLastFewFailedBuild: a failed build's waiters get its error, and the
// next caller builds again.
func TestLastFewFailedBuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var few lastFew[int, string]
		boom := errors.New("boom")
		release := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = few.get(1, nil, func() (string, error) { <-release; return "", boom })
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, boom) {
				t.Errorf("caller %d: %v, want the build's error", i, err)
			}
		}
		v, err := few.get(1, nil, func() (string, error) { return "ok", nil })
		if err != nil || v != "ok" {
			t.Errorf("after a failed build: %q, %v; want a new build", v, err)
		}
	})
}

// TestLastFewBuildPanics: the waiters of a build that panics are not left
// waiting.
func TestLastFewBuildPanics(t *testing.T) {
	var few lastFew[int, string]
	func() {
		defer func() { _ = recover() }()
		_, _ = few.get(1, nil, func() (string, error) { panic("boom") })
	}()
	if _, ok := few.building[1]; ok {
		t.Fatal("a panicked build is still in progress")
	}
	if v, err := few.get(1, nil, func() (string, error) { return "ok", nil }); err != nil || v != "ok" {
		t.Errorf("after a panicked build: %q, %v", v, err)
	}
}
