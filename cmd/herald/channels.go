package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/heraldhq/herald"
)

// configuredChannels lists the channels with at least one configured provider.
func (s *senderFlags) configuredChannels() []herald.Channel {
	var out []herald.Channel
	for _, ch := range herald.Channels {
		var ok bool
		switch ch {
		case herald.ChannelPush:
			ok = s.FCMFile != "" || s.APNsFile != ""
		case herald.ChannelWebhook:
			ok = s.WebhookEnabled
		default:
			ok = slices.ContainsFunc(multiProvider[ch].providers, func(p channelProvider) bool { return p.configured(s) })
		}
		if ok {
			out = append(out, ch)
		}
	}
	return out
}

// channels resolves --channels: the channels this installation delivers, which every role
// applies (ingest suppresses a notification's other channels as channel_unavailable).
// Without the flag: in log mode every channel, in providers mode the configured ones.
func (s *senderFlags) channels() ([]herald.Channel, error) {
	if len(s.Channels) == 0 {
		if s.Mode == sendersLog {
			return slices.Clone(herald.Channels), nil
		}
		return s.configuredChannels(), nil
	}
	var out []herald.Channel
	for _, name := range s.Channels {
		ch, err := herald.ParseChannel(strings.ToUpper(name))
		if err != nil {
			return nil, fmt.Errorf("--channels: %w (want PUSH, EMAIL, SMS, WEBHOOK)", err)
		}
		if !slices.Contains(out, ch) {
			out = append(out, ch)
		}
	}
	return out, nil
}

// validate checks the sender settings that need no connection, so that a bad one stops
// every role at start-up: the mode, the providers' weights, --public-url, the receipt
// secrets and --channels. A process with the dispatch role in providers mode must have a
// provider for every channel --channels lists.
func (s *senderFlags) validate(dispatches bool) error {
	if s.Mode != sendersLog && s.Mode != sendersProviders {
		return fmt.Errorf("--senders: %q is neither %s nor %s", s.Mode, sendersLog, sendersProviders)
	}
	if _, err := s.providerWeights(); err != nil {
		return err
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("--public-url %q: want an absolute http(s) URL without credentials, query or fragment", s.PublicURL)
		}
	}
	if s.VonageSignatureSecret != "" && s.Vonage.APIKey == "" {
		return errors.New("--vonage-signature-secret: set without --vonage-api-key")
	}
	if strings.ContainsAny(s.VonageSignatureSecret, " \t\r\n") {
		return errors.New("--vonage-signature-secret: must not contain white space")
	}
	if s.SendGridWebhookPublicKey != "" {
		if s.SendGrid.APIKey == "" {
			return errors.New("--sendgrid-webhook-public-key: set without --sendgrid-api-key")
		}
		if err := checkECDSAPublicKey(s.SendGridWebhookPublicKey); err != nil {
			return fmt.Errorf("--sendgrid-webhook-public-key: %w", err)
		}
	}
	chans, err := s.channels()
	if err != nil {
		return err
	}
	if dispatches && s.Mode == sendersProviders {
		configured := s.configuredChannels()
		for _, ch := range chans {
			if !slices.Contains(configured, ch) {
				return fmt.Errorf("--channels: %s has no provider configured in this dispatch process", ch)
			}
		}
	}
	return nil
}

// checkECDSAPublicKey checks that key is an ECDSA P-256 public key, as SendGrid's Event
// Webhook gives it (base64 of the DER SubjectPublicKeyInfo) or in PEM.
func checkECDSAPublicKey(key string) error {
	_, err := parseECDSAPublicKey(key)
	return err
}

// parseECDSAPublicKey reads an ECDSA P-256 public key, PEM or base64 DER.
func parseECDSAPublicKey(key string) (*ecdsa.PublicKey, error) {
	der := []byte(nil)
	if block, _ := pem.Decode([]byte(key)); block != nil {
		der = block.Bytes
	} else {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(key))
		if err != nil {
			return nil, errors.New("neither PEM nor base64")
		}
		der = b
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("not a public key: %w", err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, errors.New("not an ECDSA P-256 key")
	}
	return ec, nil
}
