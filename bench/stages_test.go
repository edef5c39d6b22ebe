package bench

import (
	"testing"
	"time"

	"github.com/xds-server/xds-server/xds"
)

// TestStagesOf: a change's pass is the first that took a change after
// the call; a pass without a source read (admin drain) has no consul or
// discovery stage.
func TestStagesOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	passes := []xds.PassTimes{
		{Seq: 1, Changed: at(-100), Started: at(-50), Translated: at(-49), Cached: at(-40)}, // before the call
		{Seq: 2, Read: xds.SourceRead{At: at(20)}, Changed: at(22), Started: at(72), Translated: at(75), Cached: at(100),
			FirstWrite: at(76), LastWrite: at(200)},
		{Seq: 3, Changed: at(300), Started: at(350), Translated: at(351), Cached: at(360)},
	}
	got := StagesOf(passes, t0, 250*time.Millisecond)
	want := map[string]float64{StageConsul: 0.020, xds.StageDiscovery: 0.002, xds.StageDebounce: 0.050, xds.StageTranslate: 0.003,
		xds.StageCache: 0.025, StageFirstWrite: 0.001, StageLastWrite: 0.125, StageLastNode: 0.250}
	if len(got) != len(want) {
		t.Fatalf("StagesOf = %v, want %v", got, want)
	}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	drain := StagesOf(passes, at(250), 0)
	if _, ok := drain[StageConsul]; ok || drain[xds.StageDebounce] != 0.05 {
		t.Errorf("a pass without a read: %v", drain)
	}
	if StagesOf(passes, at(400), 0) != nil {
		t.Error("a change no pass took has stages")
	}
}
