# A mistake Consul accepts but xds-server rejects: the subset rack1 filters
# on Node.Meta, which xds-server's discovery model does not keep (a filter
# that silently matched nothing would empty the subset). xds-server keeps
# web's last good resolver, so DefaultSubset v2 below does not take effect:
# web's requests stay on v1. The rejection is logged, counted
# (xds_policy_rejected_entries) and listed by `xds-server validate`.
#   consul config write examples/policy/web-resolver-bad.hcl
Kind          = "service-resolver"
Name          = "web"
DefaultSubset = "v2"
Subsets = {
  v1 = {
    Filter = "Service.Meta.version == v1"
  }
  v2 = {
    Filter = "Service.Meta.version == v2"
  }
  rack1 = {
    Filter = "Node.Meta.rack == r1"
  }
}
