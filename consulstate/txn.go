package consulstate

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"
)

// MaxTxnOps is Consul's limit of operations in one transaction.
const MaxTxnOps = 64

// Txn runs ops (at most MaxTxnOps) in one transaction, e.g. a
// check-and-set (api.KVCAS) with the writes it guards. ok is false when
// Consul rolled it back (a check failed: another writer came first);
// index is then 0, else the highest ModifyIndex of the keys it returned
// (those it set). err is a failure to ask or be answered.
func Txn(ctx context.Context, client *api.Client, ops api.TxnOps) (ok bool, index uint64, err error) {
	ok, resp, _, err := client.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return false, 0, fmt.Errorf("consulstate: transaction of %d operations: %w", len(ops), err)
	}
	if ok && resp != nil {
		for _, r := range resp.Results {
			if r.KV != nil {
				index = max(index, r.KV.ModifyIndex)
			}
		}
	}
	return ok, index, nil
}
