package webhook

import (
	"errors"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
)

// errBlockedAddress says a dial was refused because its address is not public. Its text names
// neither the URL nor the address: a webhook URL is recipient data.
var errBlockedAddress = errors.New("webhook url resolves to a non-public address")

// Loopback ranges AllowLoopback lets through; every other non-public range stays blocked.
var (
	loopbackV4 = netip.MustParsePrefix("127.0.0.0/8")
	loopbackV6 = netip.MustParsePrefix("::1/128")
)

// publicOnly returns the net.Dialer Control every webhook connection goes through. It runs on
// the address actually dialled, after DNS resolution, for every connection, a redirect's
// included: a public name that resolves (or later re-resolves) inside the network is refused
// before the socket connects. The deny list is code.dny.dev/ssrf's, generated from the IANA
// IPv4 and IPv6 special-purpose address registries: every IPv4 special-purpose block
// (private, loopback, link-local, shared 100.64.0.0/10, benchmarking 198.18.0.0/15,
// reserved 240.0.0.0/4, multicast, documentation, …) and every IPv6 address outside global
// unicast 2000::/3 (so NAT64 64:ff9b::/96, IPv4-compatible ::a.b.c.d, unique-local,
// link-local) or in a special-purpose block inside it (6to4 2002::/16, Teredo, documentation).
// An IPv4-mapped address (::ffff:a.b.c.d) is judged as the IPv4 address it carries. Only TCP
// is dialled; any port is allowed, since receivers listen where they choose.
//
// allowLoopback lets 127.0.0.0/8 and ::1 through (tests, the simulator, local development);
// never set it where webhook URLs come from users.
func publicOnly(allowLoopback bool) func(network, address string, c syscall.RawConn) error {
	opts := []ssrf.Option{ssrf.WithAnyPort()}
	if allowLoopback {
		opts = append(opts, ssrf.WithAllowedV4Prefixes(loopbackV4), ssrf.WithAllowedV6Prefixes(loopbackV6))
	}
	g := ssrf.New(opts...)
	return func(network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return errBlockedAddress
		}
		ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if err := g.Safe(network, ap.String(), c); err != nil {
			return errBlockedAddress
		}
		return nil
	}
}

// PublicOnly is the public-address guard of every webhook connection (publicOnly), for the
// other senders of caller-chosen URLs: the client webhook endpoints of the events role use it
// as their senders.HTTPConfig.DialControl.
func PublicOnly(allowLoopback bool) func(network, address string, c syscall.RawConn) error {
	return publicOnly(allowLoopback)
}

// IsBlockedAddress reports whether err is the guard refusing a dial.
func IsBlockedAddress(err error) bool { return errors.Is(err, errBlockedAddress) }
