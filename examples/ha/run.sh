#!/usr/bin/env bash
# Three xds-server replicas sharing one Consul (ha.enabled), on this machine.
# From the repository root, with consul on PATH:
#
#   examples/ha/run.sh            # starts Consul (-dev), two backends, replicas A, B, C
#
# Replica N (0, 1, 2) serves xDS on 127.0.0.1:1800N and admin on 127.0.0.1:1900N.
# Then, in another shell:
#
#   curl -s -XPOST localhost:19000/v1/drain -d '{"service":"api","endpoint":"api-1","ttl":"10m"}'   # through A
#   curl -s localhost:19001/v1/drain | jq .drains          # B lists it, and its nodes see api-1 DRAINING
#   curl -s localhost:19002/debug/ha | jq .                # C: its replica id, the drains it has seen
#   curl -s -XDELETE 'localhost:19002/v1/drain?service=api&endpoint=api-1'                          # through C
#
# A grpc-go client can list the three replicas in its bootstrap ("xds_servers", in order of
# preference) or reach them through one DNS name or L4 balancer: every replica serves it the same.
# Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/xds-server ./cmd/xds-server
go build -o bin/backend ./examples/backend

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM

consul agent -dev -client 127.0.0.1 >/tmp/xds-ha-consul.log 2>&1 &
pids+=($!)
until curl -sf localhost:8500/v1/status/leader | grep -q :; do sleep 0.2; done

for i in 1 2; do
  bin/backend -consul 127.0.0.1:8500 -service api -id "api-$i" \
    -grpc-addr "127.0.0.1:909$i" -http-addr "127.0.0.1:809$i" >/tmp/xds-ha-api-$i.log 2>&1 &
  pids+=($!)
done

for n in 0 1 2; do
  bin/xds-server --config examples/ha/xds-server.yaml \
    --xds.address "127.0.0.1:1800$n" --admin.address "127.0.0.1:1900$n" \
    --ratelimit.address "127.0.0.1:1808$n" >/tmp/xds-ha-replica-$n.log 2>&1 &
  pids+=($!)
done
for n in 0 1 2; do
  until curl -sf "localhost:1900$n/readyz" >/dev/null; do sleep 0.2; done
done
echo "replicas ready: xDS 127.0.0.1:18000-18002, admin 127.0.0.1:19000-19002; logs in /tmp/xds-ha-*.log"
wait
