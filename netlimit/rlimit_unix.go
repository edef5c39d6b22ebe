//go:build unix

package netlimit

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the soft limit on open files (RLIMIT_NOFILE) to
// the hard limit and returns the limit now in force. Go does the same at
// start on Linux since 1.19; calling it states the limit explicitly and
// covers other systems.
func RaiseFileLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, fmt.Errorf("netlimit: getrlimit: %w", err)
	}
	if r.Cur >= r.Max {
		return uint64(r.Cur), nil
	}
	want := r
	want.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return uint64(r.Cur), fmt.Errorf("netlimit: setrlimit: %w", err)
	}
	return uint64(want.Cur), nil
}
