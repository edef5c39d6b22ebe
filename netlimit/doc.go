// Package netlimit owns the connection cap of a listener: a net.Listener
// wrapper that holds at most a fixed number of open connections, closes
// every connection accepted past the cap at once (so a flood on one
// listener costs the process at most its cap in file descriptors, and
// the other listeners keep answering), and counts open and refused
// connections per listener. It also raises the process's open-file limit
// to its hard limit.
//
// netlimit must not import any other package of this module.
//
// imports_test.go enforces the import rules.
package netlimit
