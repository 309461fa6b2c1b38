package api

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// MCPAllowPrivateEnv names the operator's switch that lets MCP servers be
// on loopback and private addresses (tests, a local setup).
const MCPAllowPrivateEnv = "AGENTBUS_MCP_ALLOW_PRIVATE"

// The URL of an MCP server is reached by the sessions' agents, which run
// untrusted code: it may not send them to what only the machine or its
// cloud account should see. Hostnames are judged by their text only (no
// DNS lookup: a name resolves differently later); literal addresses by
// their range.

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

// checkMCPServerURL returns why the URL of an MCP server is refused, or
// "": it must be http or https, and name neither a cloud metadata
// service nor a link-local address, nor, unless allowPrivate, a loopback
// or private address (localhost included).
func checkMCPServerURL(raw string, allowPrivate bool) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("must be an http or https URL, got %q", raw)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return "must name a host"
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return checkMCPHostname(host, allowPrivate)
	}
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
	case !allowPrivate && (addr.IsLoopback() || addr.IsPrivate() || addr.IsUnspecified() || sharedAddressSpace.Contains(addr)):
		return "must not point to a loopback or private address (the operator may allow them with " + MCPAllowPrivateEnv + "=1)"
	case addr.IsMulticast():
		return "must not point to a multicast address"
	}
	return ""
}

func checkMCPHostname(host string, allowPrivate bool) string {
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
	if !allowPrivate && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
		return "must not point to a loopback or private address (the operator may allow them with " + MCPAllowPrivateEnv + "=1)"
	}
	return ""
}
