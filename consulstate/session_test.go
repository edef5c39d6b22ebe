package consulstate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// renewScript answers renewals in turn: "ok", "lost" or "err"; past its
// end it cancels the context and fails.
type renewScript struct {
	answers []string
	ids     []string // the session of each renewal
	cancel  context.CancelFunc
}

func (s *renewScript) renew(ctx context.Context, id string) (*api.SessionEntry, error) {
	s.ids = append(s.ids, id)
	if len(s.answers) == 0 {
		s.cancel()
		return nil, ctx.Err()
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	switch a {
	case "ok":
		return &api.SessionEntry{ID: id}, nil
	case "lost":
		return nil, nil
	}
	return nil, errors.New("consul down")
}

func TestKeepAlive(t *testing.T) {
	const every, retry = 5 * time.Second, time.Second
	for name, tc := range map[string]struct {
		answers  []string
		giveUp   time.Duration
		lost     bool // a Lost callback that moves to session "s2"
		lostErr  error
		wantErr  error // errors.Is
		wantIDs  []string
		waits    []time.Duration
		renewed  int
		failures int
	}{
		"renews every period until ctx is done": {
			answers: []string{"ok", "ok"}, wantIDs: []string{"s1", "s1", "s1"},
			waits: []time.Duration{every, every, every}, renewed: 2,
		},
		"a failure is retried sooner, then the period again": {
			answers: []string{"err", "err", "ok"}, wantIDs: []string{"s1", "s1", "s1", "s1"},
			waits: []time.Duration{every, retry, retry, every}, renewed: 1, failures: 2,
		},
		"gives up once no renewal succeeded for longer than GiveUp": {
			answers: []string{"ok", "err", "err", "err", "err", "err", "err", "err"}, giveUp: 7 * time.Second,
			wantErr: errors.New("consul down"),
			// renewed at 5s; failed at 10s, 11s, 12s, 13s: 13s-5s > 7s
			waits:   []time.Duration{every, every, retry, retry, retry},
			wantIDs: []string{"s1", "s1", "s1", "s1", "s1"}, renewed: 1, failures: 4,
		},
		"a lost session ends it without Lost": {
			answers: []string{"ok", "lost"}, wantErr: ErrSessionLost,
			wantIDs: []string{"s1", "s1"}, waits: []time.Duration{every, every}, renewed: 1,
		},
		"Lost moves on to a new session": {
			answers: []string{"lost", "ok"}, lost: true,
			wantIDs: []string{"s1", "s2", "s2"}, waits: []time.Duration{every, every, every}, renewed: 2,
		},
		"a failed Lost is retried": {
			answers: []string{"lost", "lost"}, lost: true, lostErr: errors.New("create failed"),
			wantIDs: []string{"s1", "s1", "s1"}, waits: []time.Duration{every, retry, retry}, failures: 2,
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clock := newStepClock()
			script := &renewScript{answers: tc.answers, cancel: cancel}
			id := "s1"
			renewed, failures := 0, 0
			cfg := KeepAliveConfig{Session: func() string { return id }, Every: every, Retry: retry, GiveUp: tc.giveUp,
				Renewed: func() { renewed++ }, Failed: func(error) { failures++ }, Clock: clock, renew: script.renew}
			if tc.lost {
				cfg.Lost = func(lctx context.Context) error {
					if lctx.Err() != nil {
						t.Error("Lost called with a done context")
					}
					if tc.lostErr != nil {
						return tc.lostErr
					}
					id = "s2"
					return nil
				}
			}
			err := KeepAlive(ctx, cfg)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("KeepAlive = %v, want nil", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr) && (err == nil || !strings.HasSuffix(err.Error(), tc.wantErr.Error())):
				t.Errorf("KeepAlive = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(script.ids, tc.wantIDs) {
				t.Errorf("renewed sessions %v, want %v", script.ids, tc.wantIDs)
			}
			if got := clock.waits(); !slices.Equal(got, tc.waits) {
				t.Errorf("waits %v, want %v", got, tc.waits)
			}
			if renewed != tc.renewed || failures != tc.failures {
				t.Errorf("renewed %d, failed %d; want %d, %d", renewed, failures, tc.renewed, tc.failures)
			}
		})
	}
}
