package privatestack

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecureTLSFiles: the server certificate verifies for 127.0.0.1 and localhost against its
// own CA and not against another test's CA; the client certificate is for client auth.
func TestSecureTLSFiles(t *testing.T) {
	t.Parallel()
	f := NewTLSFiles(t, t.TempDir())
	other := NewTLSFiles(t, t.TempDir())
	roots := func(file string) *x509.CertPool {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		p := x509.NewCertPool()
		require.True(t, p.AppendCertsFromPEM(b))
		return p
	}
	server, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	require.NoError(t, err)
	for _, name := range []string{"127.0.0.1", "localhost"} {
		_, err = server.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots(f.CAFile)})
		require.NoError(t, err, name)
	}
	_, err = server.Leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots(other.CAFile)})
	require.ErrorAs(t, err, new(x509.UnknownAuthorityError))

	client, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
	require.NoError(t, err)
	_, err = client.Leaf.Verify(x509.VerifyOptions{Roots: roots(f.CAFile), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
}
