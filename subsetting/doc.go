// Package subsetting owns per-client deterministic subsetting: given the
// backends of one service and a subset size k, which k backends each client
// (an xDS node, by its dense, sticky client index) connects to, and in which
// order it falls back on the others when members are not serving. It also
// owns the metrics its simulator (bench/subsetsim) reports: Loads, Churn.
//
// New(alg, backends, k) returns a Plan: an immutable, concurrency-safe
// function of the backend *set* (input order and duplicates do not matter;
// Backends() is the sorted, deduplicated list) and of the client index.
// Plan.Order(dst, client, m) appends the client's first m backends by
// preference: the first Size() are its subset, the rest its replacement
// candidates. Nothing depends on map iteration order, a global random
// source, the clock or the number of clients, so every process (every
// xds-server replica) computes the same subsets.
//
// # Classic
//
// The SRE book's "deterministic subsetting" listing, bit for bit: count =
// n/k subsets per round, round = client/count, the sorted list shuffled by
// Python's MT19937 seeded as random.seed(round) (init_by_array with the
// round's 32-bit words; [0] for 0) and the reference shuffle "for i from n-1
// down to 1: j = floor(random()*(i+1)); swap", random() having 53 bits;
// subset client%count is positions [s*k, (s+1)*k) of that list. Round 0 of
// 12 backends is [0 6 3 5 1 7 11 9 2 4 8 10] (testdata/classic.json holds
// CPython's vectors). Replacement candidates continue in the round's list
// after the client's slice, wrapping around.
//
// When k does not divide n, left = n - count*k backends sit out each round.
// Round r leaves out the backends at sorted positions (r*left + t) mod n,
// t < left: consecutive rounds leave out consecutive windows of the sorted
// list, so each backend sits out once per n/left rounds and loads stay
// within 2 of each other for any number of clients (the book leaves out
// whatever its shuffle puts last, which drifts). The round's list is the
// shuffled list with those backends moved to its end, both parts in
// shuffled order; with left == 0 it is the book's list unchanged.
//
// Classic is exactly balanced (each whole round puts every backend in one
// subset), but any change of the backend set reshuffles every round:
// about half of the connections move when one backend is added, 90-96%
// when one is removed (BENCHMARKS.md).
//
// # Steady (the default)
//
// Ringsteady (Google, "Reinventing Backend Subsetting at Google", ACM
// Queue 2022) over stable endpoint slots: NewSlotted. Ringsteady places
// backends by their task index, which Borg keeps stable; Consul service ids
// have no such index, so xds gives every endpoint of a steady service a
// slot from its index table, exactly as it gives clients their indices: an
// endpoint keeps its slot while registered and for the index TTL after it
// leaves (a restart under the same id comes back to the same place), a new
// endpoint takes the lowest free slot, and with index_source consul every
// replica shares the table. On a ring of 2^64 positions the backend in
// slot s sits at bitreverse64(s) and client i at bitreverse64(i): both are
// the binary van der Corput sequence, so any prefix of either is evenly
// spread. A client's order is the ring walked clockwise from its position:
// its subset is the first k backends, its replacements the next ones.
//
// Balance: with dense slots and as many clients as backends every backend
// gets exactly k clients; 1000 clients x 200 backends x 20 gives max/mean
// 1.05; elsewhere it stays within one connection or so of the integer
// optimum (BENCHMARKS.md). Churn: a client's order depends only on its
// index and the backends' slots, so a backend joining a free slot enters
// the k windows that reach it (one member each) and a backend leaving
// leaves its own; only its connections move, about 1/n, the minimum. A
// client joining or leaving changes nobody else's subset.
//
// Without slots (New(Steady, ids, k)), steady falls back on consistent
// hash rings, a pure function of the id set: clients are cut into aligned
// blocks of 32 consecutive indices; each block B has a ring on which
// backend b sits at mix64(mix64(fnv1a(b)) ^ key(B)) and the j-th client of
// the block at bitreverse64(j) plus a rotation hashed from B. Churn is the
// same minimum, but positions are hashes, so balance is only about 1.5 at
// 300 x 300 x 10 and 1.13 at 1000 x 200 x 20 (below 32*sqrt(k) backends a
// block splits in halves at thresholds hashed per block). xds uses it only
// if slots collide (tables mixed during an outage).
//
// Why slots: for a pure function of a set of arbitrary ids, the balance
// and churn targets conflict. Exact balance takes choices that depend on
// ranks in the sorted list or on the loads earlier clients left, and both
// carry one added id to everyone. Measured with the same random ids:
// classic (ranks) is exact with 50-96% churn; bounded-load rendezvous
// (client i takes its best-hashed backends among those below
// ceil((i+1)k/n) clients so far; bench/subsetsim keeps it as a reference)
// is exact with 14/n-98/n churn; hash rings have 1/n churn and 1.13-1.5
// balance. Stable slots remove the conflict, as task indices do at Google.
//
// Ringsteady cannot tile a backend set with fewer clients than n/k when
// that count is not a power of two (3 clients x 9 backends x 3 overlap);
// classic does, one round at a time.
//
// # Random
//
// Each client shuffles the sorted list with a generator seeded by its index
// (the SRE book's random subsetting). It is the simulator's baseline only.
//
// # Cost
//
// New sorts the ids: O(n log n). Classic builds a round (an MT19937 seeding
// and a shuffle) and hash-ring steady a ring (a linear-time bucket sort) on
// first use and caches it (up to 16,384 per plan); NewSlotted sorts the
// slots' positions once. Order is then O(log n + m) and appends to dst
// without allocating. 10,000 clients x 1,000 backends with
// k = 20 take 5-8 ms on one core (BENCHMARKS.md).
//
// subsetting uses the standard library only and imports nothing else from
// this module.
//
// imports_test.go enforces the import rules.
package subsetting
