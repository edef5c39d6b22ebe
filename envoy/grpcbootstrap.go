package envoy

import (
	"encoding/json"
	"errors"
	"fmt"
)

// grpcBootstrap is the JSON shape of grpc-go's xDS bootstrap file (the
// GRPC_XDS_BOOTSTRAP file), restricted to what GRPCBootstrap writes.
type grpcBootstrap struct {
	XDSServers []grpcXDSServer `json:"xds_servers"`
	Node       grpcNode        `json:"node"`
}

type grpcXDSServer struct {
	ServerURI      string            `json:"server_uri"`
	ChannelCreds   []grpcChannelCred `json:"channel_creds"`
	ServerFeatures []string          `json:"server_features"`
}

type grpcChannelCred struct {
	Type   string          `json:"type"`
	Config *grpcTLSCredCfg `json:"config,omitempty"`
}

// grpcTLSCredCfg is the config of grpc-go's "tls" channel credentials
// (gRFC A65); the files are watched and reloaded by grpc-go.
type grpcTLSCredCfg struct {
	CACertificateFile string `json:"ca_certificate_file"`
	CertificateFile   string `json:"certificate_file,omitempty"`
	PrivateKeyFile    string `json:"private_key_file,omitempty"`
}

type grpcNode struct {
	ID       string            `json:"id"`
	Cluster  string            `json:"cluster"`
	Locality *grpcLocality     `json:"locality,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

type grpcLocality struct {
	Region  string `json:"region,omitempty"`
	Zone    string `json:"zone,omitempty"`
	SubZone string `json:"sub_zone,omitempty"`
}

// GRPCBootstrap returns the xDS bootstrap JSON of a proxyless grpc-go
// client: its xDS servers (c.XDSAddress, in order: the later ones are
// fallbacks; insecure channel credentials or,
// with c.TLS, "tls" ones; xDS v3) and the node c.NodeID of cluster c.Cluster with c.Locality. c.Delta
// and c.AdminAddress must be unset: grpc-go speaks state of the world
// only and has no admin listener. The output is indented and ends with a
// newline.
func GRPCBootstrap(c BootstrapConfig) ([]byte, error) {
	var errs []error
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Delta {
		errs = append(errs, errors.New("envoy: grpc bootstrap: grpc-go does not speak delta xDS"))
	}
	if c.AdminAddress != "" {
		errs = append(errs, errors.New("envoy: grpc bootstrap: grpc-go has no admin listener"))
	}
	if c.TLS != nil && c.TLS.ServerName != "" {
		errs = append(errs, errors.New("envoy: grpc bootstrap: grpc-go's tls channel credentials verify the host of the xDS address and cannot override the server name: give an --xds-address whose host xds-server's certificate names"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	creds := grpcChannelCred{Type: "insecure"}
	if t := c.TLS; t != nil {
		creds = grpcChannelCred{Type: "tls", Config: &grpcTLSCredCfg{CACertificateFile: t.CAFile, CertificateFile: t.CertFile, PrivateKeyFile: t.KeyFile}}
	}
	b := grpcBootstrap{Node: grpcNode{ID: c.NodeID, Cluster: c.Cluster}}
	for _, addr := range c.xdsAddresses() {
		b.XDSServers = append(b.XDSServers, grpcXDSServer{
			ServerURI:      addr,
			ChannelCreds:   []grpcChannelCred{creds},
			ServerFeatures: []string{"xds_v3"},
		})
	}
	if c.Datacenter != "" {
		b.Node.Metadata = map[string]string{"datacenter": c.Datacenter}
	}
	if l := c.Locality; l != (Locality{}) {
		b.Node.Locality = &grpcLocality{Region: l.Region, Zone: l.Zone, SubZone: l.SubZone}
	}
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("envoy: grpc bootstrap: %w", err)
	}
	return append(out, '\n'), nil
}
