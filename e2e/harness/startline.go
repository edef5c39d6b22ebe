package harness

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// startedMsg is the message of xds-server's start-up line, logged at info
// once its listeners are open, with their addresses (xds_address,
// admin_address, ratelimit_address).
const startedMsg = "xds-server started"

// listenAddrs are the addresses of a server's listeners.
type listenAddrs struct{ xds, admin, rateLimit string }

// textAddr matches one listener address attribute of a text log line: a
// bare value, or a quoted one.
var textAddr = regexp.MustCompile(`(?:^|\s)(xds_address|admin_address|ratelimit_address)=("(?:[^"\\]|\\.)*"|\S+)`)

// startedAddrs finds the start-up line in logs (slog text or JSON) and
// returns the addresses it reports; false when there is no such line with
// all three.
func startedAddrs(logs string) (listenAddrs, bool) {
	for line := range strings.Lines(logs) {
		attrs := map[string]string{}
		if strings.HasPrefix(line, "{") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != startedMsg {
				continue
			}
			for k, v := range m {
				if s, ok := v.(string); ok {
					attrs[k] = s
				}
			}
		} else {
			if !strings.Contains(line, "msg="+strconv.Quote(startedMsg)) {
				continue
			}
			for _, m := range textAddr.FindAllStringSubmatch(line, -1) {
				v := m[2]
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
				attrs[m[1]] = v
			}
		}
		a := listenAddrs{xds: attrs["xds_address"], admin: attrs["admin_address"], rateLimit: attrs["ratelimit_address"]}
		if a.xds != "" && a.admin != "" && a.rateLimit != "" {
			return a, true
		}
	}
	return listenAddrs{}, false
}
