package main

import "syscall"

// procAttr makes a child die with the benchmark even when the benchmark is
// killed without a chance to stop it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
