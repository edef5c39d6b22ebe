package harness

// PID is the Envoy process's id (its current process after a Restart),
// for readings of /proc/<pid> such as its memory.
func (e *Envoy) PID() int { return e.cmd.Process.Pid }
