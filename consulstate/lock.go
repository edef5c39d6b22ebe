package consulstate

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/consul/api"
)

// LeadConfig configures Lead.
type LeadConfig struct {
	Client  *api.Client   // required
	Key     string        // the lock's key
	Value   []byte        // the lock's value while held (who holds it)
	Session SessionConfig // the session of each campaign; its TTL is renewed every TTL/2
	// CountError, optional, counts and logs failures by op: "session"
	// (create), "session_renew" (given up, or lost), "lock", "lock_watch",
	// "unlock".
	CountError func(op string, err error)
	// Leading is called with the session when the lock is taken, and
	// with "" when it is lost, before it is released.
	Leading func(session string)
	Clock   Clock // nil: Wall
}

// leadRetry is the wait after a failed session create, lock or lock watch.
const leadRetry = time.Second

// leadWait is the blocking wait of the lock's key.
const leadWait = time.Minute

// Lead campaigns for the lock on cfg.Key until ctx is done: it creates a
// session (retried every second), keeps it renewed every TTL/2 (given up
// after TTL without a renewal: a new session then), takes the key with it
// whenever it is free and holds it until lost. On a clean stop it
// releases the key (no lock-delay) and destroys the session.
func Lead(ctx context.Context, cfg LeadConfig) {
	cfg.Clock = orWall(cfg.Clock)
	for ctx.Err() == nil {
		sid, err := CreateSession(ctx, cfg.Client, cfg.Session)
		if err != nil {
			if ctx.Err() == nil {
				cfg.countError("session", err)
			}
			Sleep(ctx, cfg.Clock, leadRetry)
			continue
		}
		cfg.campaign(ctx, sid)
	}
}

func (c LeadConfig) countError(op string, err error) {
	if c.CountError != nil {
		c.CountError(op, err)
	}
}

// campaign keeps session sid alive and tries to take the key with it,
// leading while it holds it; it returns once the session is gone
// (destroyed on a clean stop, releasing the key without lock delay).
func (c LeadConfig) campaign(ctx context.Context, sid string) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kctx, stop := context.WithCancel(context.Background())
	renewed := make(chan error, 1)
	go func() {
		ttl := c.Session.TTL
		err := KeepAlive(kctx, KeepAliveConfig{Client: c.Client, Session: func() string { return sid },
			Every: ttl / 2, Retry: leadRetry, GiveUp: ttl, Clock: c.Clock})
		if err != nil && ctx.Err() == nil {
			c.countError("session_renew", err)
		}
		cancel()
		renewed <- err
	}()
	defer func() {
		stop()
		if <-renewed == nil { // stopped, not lost: destroy it
			dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer dcancel()
			_ = DestroySession(dctx, c.Client, sid)
		}
	}()
	for cctx.Err() == nil {
		ok, _, err := c.Client.KV().Acquire(&api.KVPair{Key: c.Key, Value: c.Value, Session: sid},
			(&api.WriteOptions{}).WithContext(cctx))
		if err != nil {
			if cctx.Err() == nil {
				c.countError("lock", err)
			}
			if SessionGone(cctx, c.Client, sid) {
				return // Consul lost it (it came back empty): a new one now, not at the next renewal
			}
			Sleep(cctx, c.Clock, leadRetry)
			continue
		}
		if ok {
			c.Leading(sid)
			c.hold(cctx, sid)
			c.Leading("")
			c.release(sid)
			continue
		}
		c.waitFree(cctx, sid)
	}
}

// waitFree blocks until the key is not held by another session, or (the
// key free but a lock-delay in force) a short retry time.
func (c LeadConfig) waitFree(ctx context.Context, sid string) {
	retry := min(c.Session.LockDelay/10+50*time.Millisecond, time.Second)
	kv := c.Client.KV()
	p, meta, err := kv.Get(c.Key, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || p == nil || p.Session == "" || p.Session == sid {
		Sleep(ctx, c.Clock, retry)
		return
	}
	_, _, err = kv.Get(c.Key, (&api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: leadWait}).WithContext(ctx))
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		Sleep(ctx, c.Clock, retry)
	}
}

// hold watches the key until it is no longer held by sid.
func (c LeadConfig) hold(ctx context.Context, sid string) {
	var index uint64
	for ctx.Err() == nil {
		p, meta, err := c.Client.KV().Get(c.Key, (&api.QueryOptions{WaitIndex: index, WaitTime: leadWait}).WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				c.countError("lock_watch", err)
			}
			// Unknown: keep leading until the session itself is lost
			// (writes fenced by it fail anyway). The next read does
			// not block: Consul may be back with its index started
			// over.
			index = 0
			Sleep(ctx, c.Clock, leadRetry)
			continue
		}
		if p == nil || p.Session != sid {
			return
		}
		index = meta.LastIndex
	}
}

// release gives the key up explicitly (no lock-delay, unlike a destroyed
// session), if sid still holds it.
func (c LeadConfig) release(sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, err := c.Client.KV().Release(&api.KVPair{Key: c.Key, Session: sid}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		c.countError("unlock", err)
	}
}
