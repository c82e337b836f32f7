package transport

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// Identity is a host's long-term Ed25519 key and its self-signed
// certificate. Peers recognise it by its Fingerprint.
type Identity struct {
	key  ed25519.PrivateKey
	cert *x509.Certificate
	tls  tls.Certificate
}

// GenerateIdentity creates a fresh Ed25519 key and a self-signed certificate
// whose subject common name is name, valid for 20 years.
func GenerateIdentity(name string) (*Identity, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("transport: generating Ed25519 key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("transport: certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(20, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("transport: self-signing certificate: %w", err)
	}
	return newIdentity(der, key)
}

func newIdentity(der []byte, key ed25519.PrivateKey) (*Identity, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("transport: parsing certificate: %w", err)
	}
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("transport: certificate key is %T, want Ed25519", cert.PublicKey)
	}
	if !pub.Equal(key.Public()) {
		return nil, errors.New("transport: private key does not match the certificate")
	}
	return &Identity{
		key:  key,
		cert: cert,
		tls:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}, nil
}

// ParseIdentity decodes a PEM certificate ("CERTIFICATE") and a PEM PKCS#8
// Ed25519 private key ("PRIVATE KEY"), and checks that they match.
func ParseIdentity(certPEM, keyPEM []byte) (*Identity, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("transport: no PEM CERTIFICATE block")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		return nil, errors.New("transport: no PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("transport: parsing private key: %w", err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("transport: private key is %T, want Ed25519", k)
	}
	return newIdentity(cb.Bytes, key)
}

// LoadIdentity reads an identity saved by Save.
func LoadIdentity(certPEMPath, keyPEMPath string) (*Identity, error) {
	cp, err := os.ReadFile(certPEMPath)
	if err != nil {
		return nil, fmt.Errorf("transport: loading identity: %w", err)
	}
	kp, err := os.ReadFile(keyPEMPath)
	if err != nil {
		return nil, fmt.Errorf("transport: loading identity: %w", err)
	}
	id, err := ParseIdentity(cp, kp)
	if err != nil {
		return nil, fmt.Errorf("loading identity from %s and %s: %w", certPEMPath, keyPEMPath, err)
	}
	return id, nil
}

// MarshalPEM returns the PEM certificate and PEM PKCS#8 private key.
func (id *Identity) MarshalPEM() (certPEM, keyPEM []byte, err error) {
	kder, err := x509.MarshalPKCS8PrivateKey(id.key)
	if err != nil {
		return nil, nil, fmt.Errorf("transport: encoding private key: %w", err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.cert.Raw})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	return certPEM, keyPEM, nil
}

// Save writes the certificate (mode 0644) and the private key (mode 0600)
// as PEM files, each atomically (temporary file and rename).
func (id *Identity) Save(certPEMPath, keyPEMPath string) error {
	cp, kp, err := id.MarshalPEM()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(keyPEMPath, kp, 0o600); err != nil {
		return fmt.Errorf("transport: saving private key: %w", err)
	}
	if err := atomicfile.Write(certPEMPath, cp, 0o644); err != nil {
		return fmt.Errorf("transport: saving certificate: %w", err)
	}
	return nil
}

// Name is the certificate's subject common name.
func (id *Identity) Name() string { return id.cert.Subject.CommonName }

// Certificate returns the self-signed certificate.
func (id *Identity) Certificate() *x509.Certificate { return id.cert }

// Fingerprint is the lower-case hex SHA-256 of the DER-encoded
// SubjectPublicKeyInfo of the identity's certificate; peers pin it.
func (id *Identity) Fingerprint() string { return CertFingerprint(id.cert) }

// CertFingerprint is the lower-case hex SHA-256 of cert's DER-encoded
// SubjectPublicKeyInfo (cert.RawSubjectPublicKeyInfo).
func CertFingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// LoadFingerprint reads a PEM certificate (for example a peer's, received
// out of band) and returns its fingerprint.
func LoadFingerprint(certPEMPath string) (string, error) {
	b, err := os.ReadFile(certPEMPath)
	if err != nil {
		return "", fmt.Errorf("transport: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return "", fmt.Errorf("transport: %s: no PEM CERTIFICATE block", certPEMPath)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("transport: %s: %w", certPEMPath, err)
	}
	return CertFingerprint(cert), nil
}

// ParseFingerprint normalizes a fingerprint: 64 hex digits, case-insensitive,
// optionally separated by colons or spaces; the result is lower-case hex.
func ParseFingerprint(s string) (string, error) {
	clean := strings.Map(func(r rune) rune {
		if r == ':' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(s)))
	b, err := hex.DecodeString(clean)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("transport: invalid fingerprint %q: want %d hex digits", s, 2*sha256.Size)
	}
	return clean, nil
}

// PinError is the handshake error of a peer whose key is not the pinned one.
type PinError struct {
	Expected string // pinned fingerprint
	Got      string // fingerprint the peer presented ("" if none)
}

// Error names both fingerprints.
func (e *PinError) Error() string {
	return fmt.Sprintf("transport: peer key mismatch: expected fingerprint %s, got %s", e.Expected, e.Got)
}

// verifyPin returns a tls.Config.VerifyConnection callback pinning fp.
func verifyPin(fp string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return &PinError{Expected: fp, Got: "(no certificate)"}
		}
		if got := CertFingerprint(cs.PeerCertificates[0]); !bytes.Equal([]byte(got), []byte(fp)) {
			return &PinError{Expected: fp, Got: got}
		}
		return nil
	}
}
