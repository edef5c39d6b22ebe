# web-resolver-v1.hcl with a load balancer: ring hash on the header
# x-user, so that every request of one user reaches the same instance of
# v1 (the default subset), and different users spread over its instances.
#   consul config write examples/policy/web-resolver-hash.hcl
Kind          = "service-resolver"
Name          = "web"
DefaultSubset = "v1"
Subsets = {
  v1 = {
    Filter = "Service.Meta.version == v1"
  }
  v2 = {
    Filter = "Service.Meta.version == v2"
  }
}
LoadBalancer = {
  Policy = "ring_hash"
  HashPolicies = [
    {
      Field      = "header"
      FieldValue = "x-user"
    },
  ]
}
