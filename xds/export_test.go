package xds

import "time"

// SetHeadLife sets how long a shared response head is kept
// (codec_shared.go) and returns what restores it. Call it before the
// server starts, and restore it after the server stopped.
func SetHeadLife(d time.Duration) (restore func()) {
	old := headLife
	headLife = d
	return func() { headLife = old }
}
