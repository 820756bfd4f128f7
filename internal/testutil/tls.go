package testutil

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

// The files ServerCert writes into its directory.
const (
	CAFile        = "ca.pem"
	ServerFile    = "server.pem"
	ServerKeyFile = "server-key.pem"
	// CAName is the CA's common name, the issuer of the server's.
	CAName = "brokertrace test CA"
)

// ServerCert writes a throwaway CA and a certificate for 127.0.0.1 it
// signs (ECDSA P-256, valid an hour either side of now) into dir, for the
// tests of a server behind TLS; it returns a pool holding only that CA, so
// that a client which trusts it trusts nothing else.
func ServerCert(tb testing.TB, dir string) *x509.CertPool {
	tb.Helper()
	caKey, caDER := newCert(tb, &x509.Certificate{
		Subject: pkix.Name{CommonName: CAName}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	key, der := newCert(tb, &x509.Certificate{
		Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, caKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, filepath.Join(dir, CAFile), "CERTIFICATE", caDER, 0o644)
	writePEM(tb, filepath.Join(dir, ServerFile), "CERTIFICATE", der, 0o644)
	writePEM(tb, filepath.Join(dir, ServerKeyFile), "PRIVATE KEY", keyDER, 0o600)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}

// newCert makes a key and a certificate of tmpl for it, signed by parent's
// key, or self-signed when parent is nil.
func newCert(tb testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	return key, der
}

func writePEM(tb testing.TB, path, typ string, der []byte, perm os.FileMode) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), perm); err != nil {
		tb.Fatal(err)
	}
}
