package subsetting

// Metrics for simulators and tests: how many clients each backend has and
// how many client->backend connections move between two plans.

// Loads returns, indexed like p.Backends(), how many of the clients
// 0..clients-1 have each backend in their subset.
func Loads(p Plan, clients int) []int {
	loads := make([]int, len(p.Backends()))
	buf := make([]int, 0, p.Size())
	for c := range max(0, clients) {
		buf = p.Order(buf[:0], c, p.Size())
		for _, i := range buf {
			loads[i]++
		}
	}
	return loads
}

// Churn compares the subsets of the given clients under two plans: total is
// the number of connections (client, backend id) before, moved how many of
// them are gone after. A client listed is assumed to exist in both.
func Churn(before, after Plan, clients []int) (moved, total int) {
	bIDs, aIDs := before.Backends(), after.Backends()
	var bBuf, aBuf []int
	for _, c := range clients {
		bBuf = before.Order(bBuf[:0], c, before.Size())
		aBuf = after.Order(aBuf[:0], c, after.Size())
		total += len(bBuf)
		for _, i := range bBuf {
			if !containsID(aIDs, aBuf, bIDs[i]) {
				moved++
			}
		}
	}
	return moved, total
}

// containsID reports whether one of the indices in subset names id.
func containsID(ids []string, subset []int, id string) bool {
	for _, i := range subset {
		if ids[i] == id {
			return true
		}
	}
	return false
}
