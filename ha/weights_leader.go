package ha

import (
	"context"

	"github.com/xds-server/xds-server/consulstate"
)

// leadLoop campaigns for the weights lead (consulstate.Lead on the leader
// key: a session of TTL SessionTTL, lock-delay LockDelay, invalidated by
// serfHealth and SessionChecks) until ctx is done.
func (w *Weights) leadLoop(ctx context.Context) {
	consulstate.Lead(ctx, consulstate.LeadConfig{
		Client: w.cfg.Client, Key: w.keys.Leader(), Value: []byte(w.cfg.Replica),
		Session: consulstate.SessionConfig{Name: "xds-server weights leader " + w.cfg.Replica, TTL: w.cfg.SessionTTL,
			LockDelay: w.cfg.LockDelay, Checks: append([]string{"serfHealth"}, w.cfg.SessionChecks...)},
		CountError: w.countError, Leading: w.setLeading,
	})
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
