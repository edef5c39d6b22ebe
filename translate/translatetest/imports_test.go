package translatetest

import (
	"testing"

	"github.com/xds-server/xds-server/internal/importrules"
)

// TestImportRules enforces doc.go's import rules (design guide §3).
func TestImportRules(t *testing.T) {
	importrules.Check(t, "xds", "xdscache", "cmd", "config",
		"google.golang.org/grpc",
		"github.com/envoyproxy/go-control-plane/pkg/server",
		"github.com/envoyproxy/go-control-plane/pkg/cache/v3")
}
