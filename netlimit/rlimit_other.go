//go:build !unix

package netlimit

// RaiseFileLimit does nothing on systems without RLIMIT_NOFILE; 0 means
// unknown.
func RaiseFileLimit() (uint64, error) { return 0, nil }
