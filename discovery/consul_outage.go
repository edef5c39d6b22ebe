package discovery

import "time"

// outageLogEvery is the least time between two failure lines of one
// blocking loop: a Consul outage writes one WARN per watch per 30s, not one
// per retry.
const outageLogEvery = 30 * time.Second

// outage follows the failures of one blocking loop and decides which of
// them are logged: the first, then at most one per outageLogEvery, each
// saying how many were held back. Pure: the caller passes the time.
type outage struct {
	since    time.Time // first failure of the current outage; zero when up
	logged   time.Time // last failure line written
	failures int       // failed queries in the current outage
	held     int       // failures not logged since the last line
}

// fail records a failure at now; it reports whether to log it and how
// many failures were held back since the last line.
func (o *outage) fail(now time.Time) (log bool, held int) {
	o.failures++
	if o.failures == 1 {
		o.since = now
	} else if now.Sub(o.logged) < outageLogEvery {
		o.held++
		return false, 0
	}
	o.logged, held, o.held = now, o.held, 0
	return true, held
}

// recover ends the outage at now; down reports whether there was one,
// with how long it lasted and how many queries failed.
func (o *outage) recover(now time.Time) (down bool, lasted time.Duration, failures int) {
	if o.failures == 0 {
		return false, 0, 0
	}
	down, lasted, failures = true, now.Sub(o.since), o.failures
	*o = outage{}
	return down, lasted, failures
}
