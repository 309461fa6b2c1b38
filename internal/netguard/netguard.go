// Package netguard decides which network destinations a URL chosen by a
// user may send agentbus to: MCP servers that agents reach, webhook
// receivers that the webhooks worker posts to. Neither may reach what only
// the machine or its cloud account should see (metadata services,
// link-local addresses) and, unless the operator allows it, loopback and
// private ranges.
package netguard

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Policy is what a kind of destination may be.
type Policy struct {
	// AllowPrivate lets the destination be a loopback or private address
	// (tests, a local setup).
	AllowPrivate bool
	// RequireHTTPS refuses plain http.
	RequireHTTPS bool
	// Switch names the operator's setting that allows private ranges, for
	// the refusal's text.
	Switch string
}

// metadataHosts are the names of cloud metadata services.
var metadataHosts = map[string]bool{
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata":                   true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
	"metadata.azure.com":         true,
}

// metadataAddrs are the addresses of cloud metadata services, refused even
// when private ranges are allowed.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack...
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task credentials
}

var (
	// sharedAddressSpace is carrier-grade NAT (RFC 6598): private in effect.
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
	// nat64 embeds an IPv4 address in its last 32 bits (RFC 6052).
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// CheckURL returns why the URL is refused, or "": it must be https (or,
// unless p.RequireHTTPS, http), and name neither a cloud metadata service
// nor a link-local address, nor, unless p.AllowPrivate, a loopback or
// private address (localhost included). Hostnames are judged by their
// text only: a name resolves differently later, so whoever connects checks
// the address it dials again (Control).
func CheckURL(raw string, p Policy) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		if p.RequireHTTPS {
			return fmt.Sprintf("must be an https URL, got %q", raw)
		}
		return fmt.Sprintf("must be an http or https URL, got %q", raw)
	}
	if p.RequireHTTPS && u.Scheme != "https" {
		return fmt.Sprintf("must be an https URL, got %q (the operator may allow http with %s=1)", raw, p.Switch)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "must name a host"
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return checkHostname(host, p)
	}
	return CheckAddr(addr, p)
}

// CheckAddr returns why the address is refused, or "".
func CheckAddr(addr netip.Addr, p Policy) string {
	addr = addr.WithZone("").Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case metadataAddrs[addr]:
		return "must not point to a cloud metadata service"
	case addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast():
		return "must not point to a link-local address"
	case !p.AllowPrivate && (addr.IsLoopback() || addr.IsPrivate() || addr.IsUnspecified() || sharedAddressSpace.Contains(addr)):
		return "must not point to a loopback or private address (the operator may allow them with " + p.Switch + "=1)"
	case addr.IsMulticast():
		return "must not point to a multicast address"
	}
	return ""
}

func checkHostname(host string, p Policy) string {
	if metadataHosts[host] {
		return "must not point to a cloud metadata service"
	}
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	// A host whose last label is a number is an IPv4 address in another
	// form (2852039166, 0xA9FEA9FE, 0251.0376.0251.0376, 169.254.43518),
	// which clients read as the address: refuse rather than decode it.
	if last != "" && (strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x")) {
		return "must write an IP address in dotted decimal, got " + host
	}
	if !p.AllowPrivate && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		return "must not point to a loopback or private address (the operator may allow them with " + p.Switch + "=1)"
	}
	return ""
}
