package consulstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
)

// SessionConfig is a session to create (behavior release: its locks are
// released, not their keys deleted, when it is invalidated).
type SessionConfig struct {
	Name      string        // shown by Consul
	TTL       time.Duration // Consul accepts 10s to 24h and invalidates a session up to 2 x TTL after its last renewal
	LockDelay time.Duration // Consul's lock-delay after invalidation; 0: Consul's default (15s)
	Checks    []string      // health check ids invalidating it; nil: Consul's default (serfHealth)
}

// CreateSession creates a session as cfg says and returns its id.
func CreateSession(ctx context.Context, client *api.Client, cfg SessionConfig) (string, error) {
	id, _, err := client.Session().Create(&api.SessionEntry{
		Name: cfg.Name, TTL: cfg.TTL.String(), LockDelay: cfg.LockDelay,
		Behavior: api.SessionBehaviorRelease, Checks: cfg.Checks,
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("consulstate: create session %q: %w", cfg.Name, err)
	}
	return id, nil
}

// DestroySession destroys session id (its locks are released at once,
// without lock-delay).
func DestroySession(ctx context.Context, client *api.Client, id string) error {
	if _, err := client.Session().Destroy(id, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("consulstate: destroy session %s: %w", id, err)
	}
	return nil
}

// SessionGone reports whether Consul answers that session id does not
// exist (an error is not an answer: the session may live).
func SessionGone(ctx context.Context, client *api.Client, id string) bool {
	e, _, err := client.Session().Info(id, (&api.QueryOptions{}).WithContext(ctx))
	return err == nil && e == nil
}

// LiveSessions lists the sessions Consul knows, with a consistent read
// (a session missing from it is gone).
func LiveSessions(ctx context.Context, client *api.Client) (map[string]bool, error) {
	list, _, err := client.Session().List((&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("consulstate: list sessions: %w", err)
	}
	alive := make(map[string]bool, len(list))
	for _, s := range list {
		alive[s.ID] = true
	}
	return alive, nil
}

// ErrSessionLost is returned by KeepAlive when Consul no longer knows the
// session and KeepAliveConfig.Lost is nil.
var ErrSessionLost = errors.New("consulstate: session lost")

// KeepAliveConfig configures KeepAlive.
type KeepAliveConfig struct {
	Client  *api.Client   // required
	Session func() string // the session to renew, read before each renewal; required
	Every   time.Duration // between two renewals, > 0 (e.g. TTL/2 or TTL/3)
	Retry   time.Duration // after a failed round instead of Every; 0: Every
	Timeout time.Duration // bounds one round (renewal and Lost); 0: ctx only
	// GiveUp, when > 0, makes KeepAlive return the last error once no
	// round succeeded for longer than GiveUp (checked before each wait).
	GiveUp time.Duration
	// Lost is called when Consul answers that it no longer knows the
	// session (e.g. to create a new one and move what the old one held);
	// its error counts as a failed round. nil: KeepAlive returns
	// ErrSessionLost.
	Lost    func(ctx context.Context) error
	Renewed func()          // after each round without error; nil: none
	Failed  func(err error) // after each failed round; nil: none
	Clock   Clock           // nil: Wall

	renew func(ctx context.Context, id string) (*api.SessionEntry, error) // tests; nil: Consul's
}

// KeepAlive renews a session every Every until ctx is done (then it
// returns nil and leaves the session to the caller to destroy), Consul
// lost it (with Lost nil) or GiveUp passed without a successful round.
func KeepAlive(ctx context.Context, cfg KeepAliveConfig) error {
	clock := orWall(cfg.Clock)
	if cfg.renew == nil {
		cfg.renew = func(ctx context.Context, id string) (*api.SessionEntry, error) {
			e, _, err := cfg.Client.Session().Renew(id, (&api.WriteOptions{}).WithContext(ctx))
			return e, err
		}
	}
	last, wait := clock.Now(), cfg.Every
	var lastErr error
	for {
		if cfg.GiveUp > 0 && clock.Now().Sub(last) > cfg.GiveUp {
			return lastErr
		}
		if !Sleep(ctx, clock, wait) {
			return nil
		}
		err := keepRound(ctx, cfg)
		switch {
		case err == nil:
			last, wait = clock.Now(), cfg.Every
			if cfg.Renewed != nil {
				cfg.Renewed()
			}
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrSessionLost) && cfg.Lost == nil:
			return err
		default:
			lastErr, wait = err, cmpDuration(cfg.Retry, cfg.Every)
			if cfg.Failed != nil {
				cfg.Failed(err)
			}
		}
	}
}

// keepRound renews the session once, calling Lost when Consul lost it.
func keepRound(ctx context.Context, cfg KeepAliveConfig) error {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	id := cfg.Session()
	entry, err := cfg.renew(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("consulstate: renew session %s: %w", id, err)
	case entry != nil:
		return nil
	case cfg.Lost == nil:
		return fmt.Errorf("%w: %s", ErrSessionLost, id)
	}
	return cfg.Lost(ctx)
}

func cmpDuration(d, otherwise time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return otherwise
}
