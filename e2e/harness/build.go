package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// binRoot holds the binaries test processes build, one directory per
// process: <TMPDIR>/xds-server-test-bins/<pid>. A test binary has no hook
// at exit, so each build first removes the directories of processes that
// are gone: at most one directory per live test process remains.
func binRoot() string { return filepath.Join(os.TempDir(), "xds-server-test-bins") }

// built is a binary built at most once per test process.
type built struct {
	once sync.Once
	path string
	err  error
}

// get builds pkg (relative to the module root) into this process's
// directory as name, once, and returns its path; envVar, when set,
// names a prebuilt binary to use instead.
func (b *built) get(t testing.TB, envVar, name, pkg string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	b.once.Do(func() {
		dir, err := processBinDir()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// processBinDir sweeps the directories of dead processes under binRoot
// and returns this process's own, created if needed.
func processBinDir() (string, error) {
	root := binRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	self := os.Getpid()
	for _, e := range entries {
		if pid, err := strconv.Atoi(strings.TrimSpace(e.Name())); err == nil && pid != self && !alive(pid) {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
	dir := filepath.Join(root, strconv.Itoa(self))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	return dir, nil
}

// alive reports whether a process with pid exists (signal 0 probes it;
// EPERM means it exists under another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
