package ha

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/consul/api"
)

// leadLoop campaigns for the weights lead with a Consul session (TTL
// SessionTTL, lock-delay LockDelay, behavior release) until ctx is done.
func (w *Weights) leadLoop(ctx context.Context) {
	for ctx.Err() == nil {
		sid, _, err := w.cfg.Client.Session().Create(&api.SessionEntry{
			Name: "xds-server weights leader " + w.cfg.Replica, TTL: w.cfg.SessionTTL.String(),
			LockDelay: w.cfg.LockDelay, Behavior: api.SessionBehaviorRelease,
			Checks: append([]string{"serfHealth"}, w.cfg.SessionChecks...),
		}, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				w.countError("session", err)
			}
			weightsSleep(ctx, time.Second)
			continue
		}
		w.campaign(ctx, sid)
	}
}

// campaign holds session sid alive and tries to take the leader key with
// it, leading while it holds it; it returns once the session is gone
// (destroyed on a clean stop, releasing the key without lock delay).
func (w *Weights) campaign(ctx context.Context, sid string) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	renewDone := make(chan struct{})
	renewErr := make(chan error, 1)
	go func() {
		renewErr <- w.cfg.Client.Session().RenewPeriodic(w.cfg.SessionTTL.String(), sid, nil, renewDone)
	}()
	defer func() { close(renewDone); <-renewErr }() // RenewPeriodic destroys the session when done
	go func() {
		select {
		case err := <-renewErr:
			renewErr <- err // for the deferred receive
			if ctx.Err() == nil {
				w.countError("session_renew", err)
			}
			cancel()
		case <-cctx.Done():
		}
	}()
	for cctx.Err() == nil {
		ok, _, err := w.kv.Acquire(&api.KVPair{Key: w.key("leader"), Value: []byte(w.cfg.Replica), Session: sid},
			(&api.WriteOptions{}).WithContext(cctx))
		if err != nil {
			if cctx.Err() == nil {
				w.countError("lock", err)
			}
			if w.sessionGone(cctx, sid) {
				return // Consul lost it (it came back empty): a new one now, not at the next renewal
			}
			weightsSleep(cctx, time.Second)
			continue
		}
		if ok {
			w.setLeading(sid)
			w.hold(cctx, sid)
			w.setLeading("")
			w.release(sid)
			continue
		}
		w.waitFree(cctx, sid)
	}
}

// sessionGone reports whether Consul answers that session sid does not
// exist (an error is not an answer: the session may live).
func (w *Weights) sessionGone(ctx context.Context, sid string) bool {
	e, _, err := w.cfg.Client.Session().Info(sid, (&api.QueryOptions{}).WithContext(ctx))
	return err == nil && e == nil
}

// waitFree blocks until the leader key is not held by another session, or
// (the key free but a lock-delay in force) a short retry time.
func (w *Weights) waitFree(ctx context.Context, sid string) {
	retry := min(w.cfg.LockDelay/10+50*time.Millisecond, time.Second)
	p, meta, err := w.kv.Get(w.key("leader"), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || p == nil || p.Session == "" || p.Session == sid {
		weightsSleep(ctx, retry)
		return
	}
	_, _, err = w.kv.Get(w.key("leader"), (&api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: time.Minute}).WithContext(ctx))
	if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		weightsSleep(ctx, retry)
	}
}

// hold watches the leader key until it is no longer held by sid.
func (w *Weights) hold(ctx context.Context, sid string) {
	var index uint64
	for ctx.Err() == nil {
		p, meta, err := w.kv.Get(w.key("leader"), (&api.QueryOptions{WaitIndex: index, WaitTime: time.Minute}).WithContext(ctx))
		if err != nil {
			if ctx.Err() == nil {
				w.countError("lock_watch", err)
			}
			// Unknown: keep leading until the session itself is lost
			// (the table write is fenced by it anyway). The next read
			// does not block: Consul may be back with its index
			// started over.
			index = 0
			weightsSleep(ctx, time.Second)
			continue
		}
		if p == nil || p.Session != sid {
			return
		}
		index = meta.LastIndex
	}
}

// release gives the leader key up explicitly (no lock-delay, unlike a
// destroyed session), if sid still holds it.
func (w *Weights) release(sid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _, err := w.kv.Release(&api.KVPair{Key: w.key("leader"), Session: sid}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		w.countError("unlock", err)
	}
}

func (w *Weights) setLeading(sid string) {
	w.mu.Lock()
	w.session, w.leading = sid, sid != ""
	if w.leading {
		w.leaderID = w.cfg.Replica
	}
	w.mu.Unlock()
	v := 0.0
	if sid != "" {
		v = 1
		w.log.Info("ha: weights: this replica leads the weights")
	} else {
		w.log.Info("ha: weights: this replica no longer leads the weights")
	}
	w.leaderGauge.Set(v)
}
