package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// RefusedError is the error of a dial to an address the policy refuses.
type RefusedError struct {
	Addr   string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused to connect to %s: %s", e.Addr, e.Reason)
}

// Control is a net.Dialer Control function that refuses to connect to an
// address p refuses. It runs after name resolution, on the very address
// about to be dialled, so a name that resolved to a public address when a
// URL was checked and to a private one now (DNS rebinding) is refused too.
func Control(p Policy) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &RefusedError{Addr: address, Reason: "not an IP address and port"}
		}
		if reason := CheckAddr(ap.Addr(), p); reason != "" {
			return &RefusedError{Addr: address, Reason: reason}
		}
		return nil
	}
}

// Dialer returns a dialer that connects only to addresses p allows.
func Dialer(p Policy) *net.Dialer {
	return &net.Dialer{Control: Control(p)}
}
