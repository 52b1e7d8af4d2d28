package main

import (
	"crypto/tls"
	"fmt"

	"github.com/heraldhq/herald/senders"
)

// tlsFlags are the TLS settings of one client connection (Kafka, Redis): "<prefix>-tls" turns
// TLS on, and any of the files or the server name turns it on too.
type tlsFlags struct {
	prefix     string
	Enabled    bool
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
}

func (t *tlsFlags) register(f *envFlags, prefix, service string) {
	t.prefix = prefix
	f.Bool(&t.Enabled, prefix+"-tls", false, "connect to "+service+" over TLS (implied by any other "+prefix+"-tls-* setting)")
	f.String(&t.CAFile, prefix+"-tls-ca-file", "", "PEM file of CAs trusted for "+service+"'s certificate, in addition to the system roots")
	f.String(&t.CertFile, prefix+"-tls-cert-file", "", "PEM client certificate (chain) presented to "+service+"; needs "+prefix+"-tls-key-file")
	f.String(&t.KeyFile, prefix+"-tls-key-file", "", "PEM key of "+prefix+"-tls-cert-file")
	f.String(&t.ServerName, prefix+"-tls-server-name", "", "name "+service+"'s certificate must carry (default: the host dialled)")
}

func (t *tlsFlags) on() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

func (t *tlsFlags) validate() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("--%s-tls-cert-file and --%s-tls-key-file go together", t.prefix, t.prefix)
	}
	return nil
}

// config is the client's TLS configuration (TLS 1.2 or later, verified against the system
// roots plus CAFile), or nil when TLS is off.
func (t *tlsFlags) config() (*tls.Config, error) {
	if !t.on() {
		return nil, nil
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	c, err := senders.TLSWithCAFile(nil, t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--%s-tls-ca-file: %w", t.prefix, err)
	}
	c.ServerName = t.ServerName
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--%s-tls-cert-file: load key pair: %w", t.prefix, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
