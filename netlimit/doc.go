// Package netlimit owns the connection cap of a listener: a net.Listener
// wrapper that holds at most a fixed number of open connections, closes
// every connection accepted past the cap at once (so a flood on one
// listener costs the process at most its cap in file descriptors, and
// the other listeners keep answering), and counts open and refused
// connections per listener. A listener may instead shed its idlest
// connection at the cap (ShedIdle, for HTTP: slow clients cannot hold
// every slot), and every listener counts connections whose read hit a
// deadline. It also raises the process's open-file limit to its hard
// limit, and Fit shares that limit between the listeners' caps, keeping
// a Reserve for everything else.
//
// netlimit must not import any other package of this module.
//
// imports_test.go enforces the import rules.
package netlimit
