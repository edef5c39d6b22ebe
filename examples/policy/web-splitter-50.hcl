# The canary, halfway: 50% of web's requests to v1, 50% to v2. Written over
# web-splitter.hcl (the same kind and name), it replaces it.
#   consul config write examples/policy/web-splitter-50.hcl
Kind = "service-splitter"
Name = "web"
Splits = [
  {
    Weight        = 50
    ServiceSubset = "v1"
  },
  {
    Weight        = 50
    ServiceSubset = "v2"
  },
]
