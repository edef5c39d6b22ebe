package xds

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// FuzzNodeMetadata reads a node's metadata as xds-server does (the node
// message in wire format, its metadata as a map; subset.index,
// subset.group and a group_by metadata key): no panic, an index in
// [0, 2^30] or an error, and strings no larger than the message allows.
func FuzzNodeMetadata(f *testing.F) {
	for _, md := range []map[string]any{
		{"subset.index": 3.0, "subset.group": "g"},
		{"subset": map[string]any{"index": "7", "group": "blue"}},
		{"subset": map[string]any{"index": -1.0}},
		{"subset.index": 1e300, "team": map[string]any{"name": []any{1.0, "x", nil, true}}},
		{"subset": "flat"},
	} {
		s, err := structpb.NewStruct(md)
		if err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(&corev3.Node{Id: "n", Metadata: s})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "team.name")
	}
	f.Fuzz(func(t *testing.T, wire []byte, key string) {
		var n corev3.Node
		if proto.Unmarshal(wire, &n) != nil {
			return
		}
		md := n.GetMetadata().AsMap()
		group, index, err := metadataIndex(md)
		if err == nil && (index < 0 || index > 1<<30) {
			t.Fatalf("index %d accepted", index)
		}
		if err != nil && (group != "" || index != 0) {
			t.Fatalf("error %v with group %q index %d", err, group, index)
		}
		limit := 8*len(wire) + 64
		if len(group) > limit {
			t.Fatalf("group of %d bytes from %d", len(group), len(wire))
		}
		if s := metadataString(md, key); len(s) > limit {
			t.Fatalf("metadata %q: %d bytes from %d", key, len(s), len(wire))
		}
	})
}
