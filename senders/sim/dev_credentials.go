package sim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// Files WriteDevCredentials creates in its directory.
const (
	FCMCredentialsFile = "fcm-service-account.json"
	APNsKeyFile        = "apns-auth-key.p8"
)

// WriteDevCredentials writes throwaway provider credentials into dir, so that herald's
// senders can run against the simulator without real accounts: an FCM service-account key
// file (project "herald-sim", token_uri pointing at the simulator's /token) and an APNs
// auth key (.p8, any key id and team id will do). The simulator accepts any signature.
func (s *Sim) WriteDevCredentials(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sim: credentials dir: %w", err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("sim: fcm key: %w", err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("sim: apns key: %w", err)
	}
	rsaPEM, err := pkcs8PEM(rsaKey)
	if err != nil {
		return err
	}
	ecPEM, err := pkcs8PEM(ecKey)
	if err != nil {
		return err
	}
	sa, err := json.MarshalIndent(map[string]string{
		"type":           "service_account",
		"project_id":     "herald-sim",
		"private_key_id": "sim",
		"private_key":    string(rsaPEM),
		"client_email":   "herald@herald-sim.iam.gserviceaccount.com",
		"token_uri":      "http://" + s.Addr() + "/token",
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, FCMCredentialsFile), sa, 0o600); err != nil {
		return fmt.Errorf("sim: write fcm credentials: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, APNsKeyFile), ecPEM, 0o600); err != nil {
		return fmt.Errorf("sim: write apns key: %w", err)
	}
	return nil
}

func pkcs8PEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sim: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
