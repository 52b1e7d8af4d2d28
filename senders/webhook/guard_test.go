package webhook

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestGuardRanges(t *testing.T) {
	strict, loopback := publicOnly(false), publicOnly(true)
	for _, tc := range []struct {
		addr     string
		allowed  bool // with production defaults
		loopback bool // with AllowLoopback
	}{
		{"93.184.215.14:443", true, true},
		{"8.8.8.8:8443", true, true},
		{"[2606:4700:4700::1111]:443", true, true},
		{"[::ffff:8.8.8.8]:443", true, true}, // IPv4-mapped public: judged as 8.8.8.8
		{"127.0.0.1:443", false, true},
		{"127.10.0.1:80", false, true},
		{"[::1]:443", false, true},
		{"[::ffff:127.0.0.1]:443", false, true}, // IPv4-mapped loopback
		{"0.0.0.0:443", false, false},
		{"10.1.2.3:443", false, false},
		{"172.16.0.1:443", false, false},
		{"192.168.1.1:443", false, false},
		{"169.254.169.254:80", false, false},
		{"100.64.0.1:443", false, false},      // shared address space (CGNAT)
		{"100.127.255.254:443", false, false}, // its last address
		{"198.18.0.1:443", false, false},      // benchmarking
		{"198.19.255.254:443", false, false},
		{"240.0.0.1:443", false, false}, // reserved
		{"255.255.255.255:443", false, false},
		{"224.0.0.1:443", false, false},
		{"192.0.2.1:443", false, false},
		{"[64:ff9b::a9fe:a9fe]:80", false, false},     // NAT64 of 169.254.169.254
		{"[64:ff9b::7f00:1]:443", false, false},       // NAT64 of 127.0.0.1
		{"[2002:a9fe:a9fe::1]:80", false, false},      // 6to4 of 169.254.169.254
		{"[2002:7f00:1::1]:443", false, false},        // 6to4 of 127.0.0.1
		{"[::7f00:1]:443", false, false},              // IPv4-compatible 127.0.0.1
		{"[::a9fe:a9fe]:80", false, false},            // IPv4-compatible 169.254.169.254
		{"[::ffff:169.254.169.254]:80", false, false}, // IPv4-mapped link-local
		{"[::ffff:100.64.0.1]:443", false, false},
		{"[::ffff:10.0.0.1]:443", false, false},
		{"[fe80::1]:443", false, false},
		{"[fc00::1]:443", false, false},
		{"[fd12:3456::1]:443", false, false},
		{"[::]:443", false, false},
		{"[ff02::1]:443", false, false},
		{"[2001:db8::1]:443", false, false},
		{"[2001::1]:443", false, false}, // Teredo
	} {
		ap := netip.MustParseAddrPort(tc.addr)
		network := "tcp6"
		if ap.Addr().Is4() {
			network = "tcp4"
		}
		err := strict(network, tc.addr, nil)
		if tc.allowed {
			require.NoError(t, err, tc.addr)
		} else {
			require.ErrorIs(t, err, errBlockedAddress, tc.addr)
		}
		err = loopback(network, tc.addr, nil)
		if tc.loopback {
			require.NoError(t, err, "%s with AllowLoopback", tc.addr)
		} else {
			require.ErrorIs(t, err, errBlockedAddress, "%s with AllowLoopback", tc.addr)
		}
	}
	require.ErrorIs(t, strict("udp4", "8.8.8.8:443", nil), errBlockedAddress, "only TCP")
	require.ErrorIs(t, strict("tcp4", "not-an-address", nil), errBlockedAddress)
}

// requireBlocked checks that err is the one-attempt permanent failure of a refused address.
func requireBlocked(t *testing.T, err error) {
	t.Helper()
	class, se := senders.Classify(err)
	require.Equal(t, senders.Permanent, class, "error: %v", err)
	require.Equal(t, "blocked_address", se.Code)
}

// With HTTPS_PROXY and HTTP_PROXY pointing at a listening proxy, a webhook to the metadata
// address goes neither to the proxy (which the guard would have vetted instead of the target)
// nor anywhere else.
func TestEnvironmentProxyNotUsed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var accepted atomic.Int32
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	proxy := "http://" + ln.Addr().String()
	t.Setenv("HTTPS_PROXY", proxy)
	t.Setenv("HTTP_PROXY", proxy)
	t.Setenv("NO_PROXY", "")

	// Loopback allowed, so that the proxy itself would pass the guard: only the target's
	// address can refuse this delivery.
	s, err := New(Config{AllowHTTP: true, AllowLoopback: true, Timeout: 2 * time.Second}, sendertest.WebhookSecrets(nil), zap.NewNop())
	require.NoError(t, err)
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "https://100.64.0.1/hook"} {
		_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{WebhookURL: u}))
		requireBlocked(t, err)
	}
	require.Zero(t, accepted.Load(), "the proxy received a connection")
}

// A public-looking name that resolves inside the network is refused on the resolved address,
// and no connection reaches the server listening there.
func TestNameResolvingInsideIsBlocked(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	for name, ip := range map[string]string{
		"hooks.example.com.":    "127.0.0.1", // where srv listens
		"cgnat.example.com.":    "100.64.0.1",
		"bench.example.com.":    "198.18.0.1",
		"metadata.example.com.": "169.254.169.254",
	} {
		resolver := fakeDNS(t, map[string]string{name: ip})
		s, err := New(Config{AllowHTTP: true, Timeout: 2 * time.Second,
			HTTP: senders.HTTPConfig{Resolver: resolver}}, sendertest.WebhookSecrets(nil), zap.NewNop())
		require.NoError(t, err)
		u := "http://" + name[:len(name)-1] + ":" + port + "/hook"
		_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{WebhookURL: u}))
		requireBlocked(t, err)
	}
	require.Zero(t, hits.Load())
}

// A receiver allowed by the guard that redirects to the metadata address gets its 3xx as a
// permanent failure: the redirect is not followed (a redirect's dial would be vetted too).
func TestRedirectToMetadataIsNotFollowed(t *testing.T) {
	var redirected atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/followed" {
			redirected.Add(1)
		}
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	s, err := New(Config{AllowHTTP: true, AllowLoopback: true, Timeout: 2 * time.Second}, sendertest.WebhookSecrets(nil), zap.NewNop())
	require.NoError(t, err)
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{WebhookURL: srv.URL + "/hook"}))
	class, se := senders.Classify(err)
	require.Equal(t, senders.Permanent, class, "error: %v", err)
	require.Equal(t, strconv.Itoa(http.StatusTemporaryRedirect), se.Code)
	require.Zero(t, redirected.Load())
}

// fakeDNS serves A records for names on a UDP socket and returns a resolver that asks it.
func fakeDNS(t *testing.T, names map[string]string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := dnsAnswer(buf[:n], names); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer answers an A question for a known name, and any other question with no records.
func dnsAnswer(query []byte, names map[string]string) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.EnableCompression()
	_ = b.StartQuestions()
	_ = b.Question(q)
	_ = b.StartAnswers()
	if ip, ok := names[q.Name.String()]; ok && q.Type == dnsmessage.TypeA {
		_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
			dnsmessage.AResource{A: netip.MustParseAddr(ip).As4()})
	}
	reply, err := b.Finish()
	if err != nil {
		return nil
	}
	return reply
}
