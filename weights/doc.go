// Package weights owns load-balancing weights from utilization: the
// report model, the weight formula, the tracker that turns reports into a
// global weight table (blackout, expiry, smoothing, overload guard,
// integer scaling, push policy) and the per-node solver, plus the shell
// around that core: report ingestion (orca.go: the ORCA out-of-band client;
// lrs.go: the LRS server; http.go and load.go: the HTTP push API) and the
// Runner (run.go), the track and publish stages: the tracker's table, the
// push policy, and /debug/weights. The core (report, formula, tracker,
// table, scale, solver) has no goroutines, no I/O, no logging and no clock
// (every method that needs the time takes it as now) and imports only the
// standard library; the shell uses gRPC, go-control-plane's LRS and ORCA
// protos, and Prometheus.
//
// The Pipeline (pipeline.go, pipeline_observe.go, stages.go) wires it
// all for the server as explicit stages (stages.go): ingest (discovery
// snapshots give the ORCA targets, the LRS address map and the tracker's
// endpoints; reports are filtered by each service's sources) -> HA merge
// (pipeline_ha.go, with ha.enabled) -> track (Runner.Track) -> solve
// (balancing global-mode services) -> spill (zones' Keep, services with
// spill on) -> publish (Runner.Offer: the push
// policy hands the table to a Publisher, an interface *xds.Server
// satisfies, and plans per-node weights; then the lame-duck transitions).
// Data only flows in: the nodes' subsets are fed to it (SetSubsets, a
// Subsets view the xDS server publishes after each pass; subsets.go), and
// the drains subscribe to ORCA reports' LameDuck transitions
// (SubscribeLameDuck; lameduck.go), delivered on the pipeline's goroutine
// so that a subscriber may block. Nothing in weights calls the xDS server
// or the drains back.
//
// weights may import discovery (the model) and the internal/ leaves
// (httpjson for the push API's and /debug/weights' answers, metricreg,
// pause); it must not import envoy, xds or cmd: it hands plain values
// (Table, Solution, weight maps) to the xds reconciler, which translates
// them, and reads xds's subsets through its own Subsets interface.
//
// # Reports and the formula
//
// A Report is one measurement of one endpoint: from the backend itself
// (ORCA, HTTP: Node == "", with its total QPS and EPS and its CPU and
// application utilization) or from a client (LRS: Node is the xDS node,
// with that node's QPS and EPS to the endpoint; grpc-go reports a
// locality's load only, which the pipeline spreads over the node's subset
// in the shares of the EDS weights it last sent that node:
// pipeline_split.go). Rates are per second;
// utilization is the fraction of capacity in use (1 = all of it, up to
// MaxUtilization; 0 = unknown). Weight is gRFC A58's formula,
//
//	weight = qps / (utilization + (eps/qps) * penalty)
//
// with utilization = App if set, else CPU: with no errors, the estimated
// capacity in requests/s at utilization 1.
//
// # Tracker
//
// The Tracker is told the endpoints of each service by discovery
// (SetEndpoints, with the static weight from Consul) and receives reports
// (Observe). An endpoint's measurement merges its fresh reports (younger
// than ExpirationPeriod): utilization from its backend report, else the
// largest any client reports; qps and eps from the backend report when its
// qps > 0, else summed over the clients' reports. A measurement is usable
// when the formula gives a weight.
//
// Update(now) computes the table. Per endpoint, as in gRFC A58: the
// endpoint's own weight is used once its streak of usable measurements is
// BlackoutPeriod old (the streak restarts after an expiry) and until its
// last usable measurement is older than ExpirationPeriod; reports that are
// not usable (0 qps, unknown utilization) neither end the streak nor
// extend it. Endpoints without an own weight (reasons blackout,
// expired, incomplete, no_reports) get the mean own weight of the service,
// or their static weight when no endpoint of the service has one.
//
// Smoothing is an EWMA with factor Smoothing, one step per Update that has
// seen a new report of the endpoint (so its time constant is in report
// intervals, not in Update calls). During the blackout it starts over at
// each measurement: a first measurement far off (a utilization near 0
// makes a weight near infinite) is forgotten when the blackout ends,
// instead of halving per report from there.
//
// # Overload guard
//
// At the same steps the guard reads the measured utilization, but it moves
// at most once per OverloadPeriod (default 5s, the push interval), on the
// mean m of the readings over that period, never on one reading: a backend
// at 0.75 whose one-second readings cross 0.9 on noise keeps its weight.
// With g the endpoint's guard (in [1/MaxRatio, 1], its own weight's
// multiplier) and target the middle of the two marks (0.85):
//
//	m >  OverloadThreshold (0.9):             g *= max(target/m, OverloadFactor)   (OverloadFactor if m >= 1)
//	OverloadRecover (0.8) <= m <= threshold:  g unchanged
//	m <  OverloadRecover:                     g *= min(target/m, 1/OverloadFactor), at most 1
//
// A move is in proportion to the excess, so one move aims the utilization
// back into the band between the marks, a mean just past a mark costs
// little, and a saturated endpoint (whose utilization cannot show by how
// much) sheds the full OverloadFactor (0.75) every period. Moving once per
// period, on readings taken while the last move reached the clients, the
// guard does not cut again for load it already shed (one move per push,
// not five). The cut weight goes to all other endpoints in proportion to
// their weights, hence mostly to the least loaded (the largest weights).
// An endpoint regains weight only below the lower mark (hysteresis). The
// reason is overloaded after a cut and while holding, recovering after a
// gain and while holding, reported once g is back to 1.
//
// # Integer weights and pushes
//
// Scale maps each service's float weights to EDS weights (the service is
// one locality): weights below max/MaxRatio are raised to it, the smallest
// maps to 100 (so rounding keeps proportions to 1%), every weight is >= 1
// and the sum stays under 2^32-1 (the scale shrinks for huge services).
// Changed is the push policy: push when an endpoint appeared, disappeared
// or expired (or came back), or when some endpoint's share of its service
// moved by more than minChange (default 5%) since the last push.
//
// # Balanced global weights
//
// Balance (and BalanceService on a table) keeps one weight per endpoint but
// uses the nodes' rates and subsets: under weights w, node i sends
// R_i * w_j / sum_{k in S_i} w_k to each member j, so every endpoint's
// utilization is predictable. From the formula's weights, each step
// multiplies w_j by sqrt(mean utilization / u_j) and clamps the weights
// to within sqrt(MaxRatio) of their geometric mean; the best weights seen
// (lowest predicted max/mean) are kept, and the steps stop when they stop
// improving. The inputs do not depend on the weights, so each call solves
// from scratch and nothing oscillates. On the simulator's fleets it takes
// max/mean from 1.37 (capacity weights) to 1.06.
//
// # Per-node solver
//
// With subsets and clients of unequal rates no global weight per backend
// equalizes utilization. Solve knows each node's rate R_i (the sum of its
// LRS rates) and subset S_i, each endpoint's capacity C_j (qps/utilization,
// Row.Capacity) and background load B_j (requests/s from clients it does
// not steer), and looks for splits x_ij (j in S_i, sum_j x_ij = R_i) that
// equalize u_j = (B_j + sum_i x_ij) / C_j.
//
// Method: water-filling by block coordinate descent (Gauss-Seidel). The
// splits minimize the convex potential sum_j L_j^2 / (2 C_j), L_j the load
// of endpoint j; its minimizers are exactly the balanced splits, where each
// node sends only to the least utilized members of its subset, which also
// minimize the maximum utilization. Starting from splits proportional to
// capacity, the nodes are swept in order, each replacing its split with its
// exact best response to the others' loads: water-filling its rate over its
// subset up to a common utilization level. Each step minimizes the
// potential over one node's split, so it never rises: no oscillation. A
// sweep costs O(nodes * k^2) at worst (an insertion sort of k levels per
// node; k, the subset size, is small); the
// sweeps stop when no node moved more than Tolerance of its rate. 1,000
// nodes x 1,000 endpoints with k = 20 take 10 sweeps, about 10 ms on one
// core (BenchmarkSolve), and reach max/mean utilization 1.017 where round
// robin gives 3.4 and global weights 2.6.
//
// Every member gets at least a floor share of the node's rate: at first
// R_i / (MaxRatio + k - 1), which keeps the largest share within MaxRatio
// times the smallest whatever the split; after each response the floor
// falls to the node's largest share over MaxRatio when that is lower.
// Floors never rise, so each response minimizes the potential over a set
// that holds the current split: the potential still never rises. Every
// endpoint keeps some traffic (and so keeps reporting), and the solver
// accounts for the floors, so scaling to integers (which raises anything
// below max/MaxRatio) changes little.
//
// Across solves, each node's split moves only Damping (default 0.5) of the
// way from the weights last sent to it (NodeLoad.Previous) toward the
// optimum, so noisy capacities cannot make the fleet swing. Nodes whose
// rates are unknown get the global weights of their subset. An endpoint without its own weight (blackout, expired) has no
// known capacity (the first measurements are what the blackout distrusts);
// while endpoints are in blackout and none has its own weight yet, every
// node keeps the global weights (PerNode.Plan).
//
// Reference instance (design guide §6; 100 backends of capacity 1-2x, 300
// clients, lognormal rates with sigma 1, random subsets of 10): round
// robin gives max/mean utilization 1.65-2.16, global (capacity) weights
// 1.68-1.85, per-node weights 1.001 (TestSolveBalancesRandomFleet); with
// damping 0.5 from round robin, 1.05 is reached in five solves.
//
// # Capacity-aware spill (ServiceConfig.Spill)
//
// For a service with spill on (weights enabled and a locality failover
// list), the spill stage (spill_stage.go, after solve) keeps per zone
// (ZoneKey: its endpoints' locality region and zone) a Keep, the share of
// the zone's own nodes' requests the zone serves; the translation sends
// the rest, 1-Keep, to the next locality level, spread over that level's
// zones in proportion to their Spare (requests/s below the overload
// threshold), so a zone without spare capacity receives nothing. A zone's
// capacity is the sum of Row.Capacity of its serving endpoints (an
// unhealthy or DRAINING endpoint, whatever drained it, counts as none; one
// of unknown capacity adds neither load nor capacity), its load their
// Row.QPS, its utilization U = load/capacity. An idle zone (every serving
// endpoint of unknown capacity and without load: no clients of its own)
// counts each at the service's mean capacity, so that it can take spill.
//
// The controller (Spiller, spill.go; pure, no clock) paces itself as the
// overload guard does, with the guard's marks: it moves at most once per
// OverloadPeriod, on the mean U of the period. Above OverloadThreshold
// (0.9) Keep *= threshold/U, which spills exactly the excess load
// capacity*(U - threshold) of a zone serving its own nodes (a saturated
// zone, U >= 1, keeps at most OverloadFactor per move); between the
// marks it holds (hysteresis); below OverloadRecover (0.8) Keep grows
// toward 1 aiming at the middle of the marks. Keep never goes below
// MinKeep (0.05: the zone keeps reporting), and the load all of a
// service's zones spill at one step never exceeds the Spare its zones had
// (spilling what nobody can take only moves the overload). On a closed
// loop of two zones of 100 requests/s (TestSpillClosedLoop: 130 and 30
// requests/s of own demand, 2% noise, pushes applied 2 s late) zone a
// spills 40.9 requests/s in four moves (about 20 s), runs at 0.89 and b at
// 0.71, and nothing moves in the next 300 s; when a's demand drops to 50,
// Keep returns to 1 at the next period.
//
// The states go to the Publisher when it is a SpillPublisher, only when a
// zone appeared or left or some Keep moved (to or from 1, or by more than
// MinChange of the smaller of its kept and spilled shares): Utilization
// and Spare alone never push. /debug/weights shows them as the service's
// zones; xds_weights_zone_keep, xds_weights_zone_utilization and
// xds_weights_zone_spare_rps{service,region,zone} export them (series of
// the spill services' zones seen in discovery, deleted when a zone
// leaves). With HA, every replica computes the states from the merged
// table (every replica's summaries), not the leader's stored one, which
// holds weights only: replicas see the same loads and so move alike, but
// each runs its own periods, so for up to a period (and a summary
// interval) their Keeps may differ by one move.
//
// # Several replicas (PipelineConfig.HA)
//
// With HA set (ha.enabled), each replica still ingests what reaches it
// (ORCA, LRS, POST /v1/load) into its own tracker, but solves from a second,
// merged tracker. Every Step it builds its Summary (summary.go): per
// service, the latest fresh backend report per endpoint and its nodes'
// client load aggregated per distinct subset (one GroupLoad per subset,
// never a row per node; report times as ages from the summary's time,
// rates to 5 significant digits) and hands it to a SummaryExchange (the ha
// package writes it to Consul at most every ha.publish_interval). The
// Merger feeds every replica's latest summary (its own fresh) into the
// merged tracker: a backend load is a backend report, a group's load a
// client report from the pseudo node "~<replica>/<subset hash>", and only
// loads newer than last time count, so the smoothing steps with reports,
// not with publications. So the merged tracker computes what one replica
// receiving every report would: the same measurements, the same formula
// (TestMergedSummariesSolveLikeOneReplica); balancing sees the pseudo
// nodes and their subsets, which is all Balance needs.
//
// Every replica runs the runner over the merged tracker (so a new leader
// starts warm), but only the weights leader (TableExchange.Leader) writes
// its table, when the push policy says it changed, and on taking the lead
// when the stored table differs by more than MinChange; every replica,
// the leader included, serves the table from the store, so all send the
// same weights. per_node services are planned locally: the merged table
// gives the capacities and each endpoint's total load, this replica's
// tracker its own nodes' rates, so the other replicas' load is background
// (NewProblem), and the fleet converges like a Gauss-Seidel sweep across
// replicas. When no leader writes, replicas keep the last table.
//
// imports_test.go enforces the import rules.
package weights
