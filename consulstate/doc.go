// Package consulstate is the one layer through which xds-server keeps
// state shared by its replicas in Consul: ha (drains, departures, the
// weights exchange and its leader) and nodeindex (the client-index
// tables) both build on it. It owns:
//
//   - the blocking-query rules and retry delays (index.go: NextIndex,
//     Backoff; discovery's Consul source uses them too);
//   - a blocking-query watch loop (watch.go: Watch) with those rules, a
//     least interval between queries and jittered backoff, on an injected
//     Clock (clock.go: Clock, Sleep);
//   - sessions (session.go: CreateSession, KeepAlive, DestroySession,
//     SessionGone, LiveSessions) and a lock held with one (lock.go: Lead);
//   - transactions (txn.go: Txn, MaxTxnOps);
//   - the Consul API client (client.go: NewClient, with TLS and an ACL
//     token file followed on rotation, token.go): discovery's Consul
//     source, ha and nodeindex all take their client from it, and
//     cmd/xds-server makes one for ha and nodeindex together.
//
// Sessions are not shared between ha and nodeindex: the weights leader's
// session (TTL 10s, lock-delay ha.leader_lock_delay, invalidated by the
// replica's alive check, renewed every TTL/2, re-created after it is lost)
// and the index session (TTL subsetting's session TTL, 15s by default, no
// check but serfHealth, renewed every TTL/3, its holds moved to a new one
// when lost) differ in TTL, checks and what losing them means; one session
// would change when a replica's index holds lapse. Each package keeps its
// own KV layout, keys, values, TTLs and retry timings.
//
// consulstate imports certs (to follow the token file) and internal/*
// leaves; it must not import any other package of this module.
//
// imports_test.go enforces the import rules.
package consulstate
