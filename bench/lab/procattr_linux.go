package main

import "syscall"

// procAttr makes a child die with the lab even when the lab is killed
// without a chance to stop it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
