package privatestack

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are PEM files of a certificate authority made for one test, a server certificate
// it signed for 127.0.0.1 and localhost, and a client certificate it signed. Keys are
// unencrypted PKCS #8 (what Kafka's PEM key store, PostgreSQL and Redis all read).
type TLSFiles struct {
	CAFile         string
	CertFile       string // the server's certificate
	KeyFile        string // the server's key
	ClientCertFile string
	ClientKeyFile  string
}

// NewTLSFiles makes a new CA and its certificates in dir. Two calls make two unrelated CAs:
// a client that trusts one rejects a server of the other.
func NewTLSFiles(t testing.TB, dir string) TLSFiles {
	t.Helper()
	f := TLSFiles{
		CAFile:         filepath.Join(dir, "ca.pem"),
		CertFile:       filepath.Join(dir, "server.pem"),
		KeyFile:        filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
	}
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "herald test CA " + filepath.Base(dir)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("privatestack: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("privatestack: CA certificate: %v", err)
	}
	writePEM(t, f.CAFile, "CERTIFICATE", caDER)

	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("privatestack: %s certificate: %v", cn, err)
		}
		pk, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatalf("privatestack: %s key: %v", cn, err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", pk)
	}
	leaf(2, "localhost", x509.ExtKeyUsageServerAuth, f.CertFile, f.KeyFile)
	leaf(3, "herald", x509.ExtKeyUsageClientAuth, f.ClientCertFile, f.ClientKeyFile)
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("privatestack: key: %v", err)
	}
	return k
}

func writePEM(t testing.TB, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("privatestack: write %s: %v", file, err)
	}
}
