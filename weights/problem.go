package weights

// NewProblem builds Solve's input for one service from the tracker's table
// and the service's nodes (each with its subset, its fresh rates from
// Tracker.NodeRates and the weights last sent to it). Every row of svc
// becomes an endpoint with Capacity = Row.Capacity, Global = Row.Float and
// Background = Row.QPS minus the rates of the given nodes to it (at least
// 0): the load of clients the solver does not steer. A row without its own
// weight (blackout, expired, incomplete: !Reason.Own()) has capacity 0,
// unknown: its first measurements are what the blackout period distrusts
// (a first ORCA report of 44 requests/s at utilization 0.004 made a
// backend of 175 requests/s look like 10,000), and the solvers fill it in
// from the others. nodes is used as is (not copied).
func NewProblem(svc ServiceTable, nodes []NodeLoad) Problem {
	steered := make(map[string]float64, len(svc.Rows))
	for _, n := range nodes {
		for id, r := range n.Rates {
			steered[id] += r
		}
	}
	p := Problem{Endpoints: make([]EndpointLoad, len(svc.Rows)), Nodes: nodes}
	for i, r := range svc.Rows {
		capacity := r.Capacity
		if !r.Reason.Own() {
			capacity = 0
		}
		p.Endpoints[i] = EndpointLoad{
			ID:         r.Endpoint,
			Capacity:   capacity,
			Background: max(0, r.QPS-steered[r.Endpoint]),
			Global:     r.Float,
		}
	}
	return p
}
