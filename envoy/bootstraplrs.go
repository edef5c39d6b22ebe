package envoy

import (
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// loadStatsManager is the cluster_manager of a generated Envoy bootstrap:
// load reports (LRS, envoy.service.load_stats.v3) go to xds-server over
// its static cluster, the one ADS uses. Envoy ignores a cluster's
// lrs_server (it is not implemented there: Envoy 1.40 reports only to
// cluster_manager.load_stats_config), so without this an Envoy never
// reports the load that weights with the lrs source, balanced global
// weights and per-node weights need. xds-server's LRS server then asks for
// every cluster, per endpoint, every weights.lrs_interval. LRS has no
// incremental variant: the api_type is GRPC also for delta xDS.
func loadStatsManager() *bootstrapv3.ClusterManager {
	return &bootstrapv3.ClusterManager{LoadStatsConfig: &corev3.ApiConfigSource{
		ApiType:             corev3.ApiConfigSource_GRPC,
		TransportApiVersion: corev3.ApiVersion_V3,
		GrpcServices: []*corev3.GrpcService{{
			TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
				EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: XDSClusterName},
			},
		}},
	}}
}
