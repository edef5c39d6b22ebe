# The canary: 90% of web's requests to v1, 10% to v2.
#   consul config write examples/policy/web-splitter.hcl
Kind = "service-splitter"
Name = "web"
Splits = [
  {
    Weight        = 90
    ServiceSubset = "v1"
  },
  {
    Weight        = 10
    ServiceSubset = "v2"
  },
]
