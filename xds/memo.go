package xds

import (
	"github.com/xds-server/xds-server/discovery"
	"github.com/xds-server/xds-server/envoy"
	"github.com/xds-server/xds-server/translate"
	"github.com/xds-server/xds-server/xdscache"
)

// memoEntry is the translation of one service, kept while its input is unchanged.
type memoEntry struct {
	src   discovery.Service
	set   translate.ServiceSettings
	items xdscache.ServiceItems
	plan  *servicePlan      // nil when the service is not subset
	w     map[string]uint32 // the weights it was translated with
	in    envoy.Service     // the translation input
	view  *viewService      // what subsets views need of it
	slots map[string]int    // steady slots of its endpoints; nil when not slotted
}
