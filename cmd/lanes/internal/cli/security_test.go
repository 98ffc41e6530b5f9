package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writePEMPair writes a self-signed certificate and its key as PEM files.
func writePEMPair(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lanes test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func TestSecurityFlags(t *testing.T) {
	for _, v := range []string{"LANES_SASL_USER", "LANES_SASL_PASSWORD", "LANES_SASL_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	cert, key := writePEMPair(t, dir)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := []string{"--brokers", "127.0.0.1:1"}
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		opts  int    // options built, when no error is expected
		error string // part of the error, "" for none
	}{
		{name: "none", args: b, opts: 0},
		{name: "tls with system roots", args: append(b, "--tls"), opts: 1},
		{name: "mutual tls", args: append(b, "--tls-ca", cert, "--tls-cert", cert, "--tls-key", key), opts: 1},
		{name: "scram", args: append(b, "--sasl-mechanism", "scram-sha-512", "--sasl-user", "u", "--sasl-password", "p"), opts: 1},
		{name: "tls and plain from env", args: append(b, "--tls-ca", cert, "--sasl-mechanism", "PLAIN"),
			env: map[string]string{"LANES_SASL_USER": "u", "LANES_SASL_PASSWORD": "p"}, opts: 2},
		{name: "oauth", args: append(b, "--sasl-mechanism", "OAUTHBEARER", "--sasl-token", "t"), opts: 1},
		{name: "aws", args: append(b, "--tls", "--sasl-mechanism", "AWS_MSK_IAM"),
			env: map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}, opts: 2},
		{name: "embedded broker", args: []string{"--tls"}, error: "need --brokers"},
		{name: "cert without key", args: append(b, "--tls-cert", cert), error: "--tls-key: missing"},
		{name: "missing ca", args: append(b, "--tls-ca", filepath.Join(dir, "nope.pem")), error: "--tls-ca: open"},
		{name: "ca not pem", args: append(b, "--tls-ca", notPEM), error: "no PEM certificate"},
		{name: "key not matching", args: append(b, "--tls-cert", cert, "--tls-key", notPEM), error: "--tls-cert/--tls-key"},
		{name: "unknown mechanism", args: append(b, "--sasl-mechanism", "GSSAPI"), error: `"GSSAPI": want one of PLAIN`},
		{name: "scram without password", args: append(b, "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", "u"), error: "--sasl-password: missing"},
		{name: "user without mechanism", args: append(b, "--sasl-user", "u"), error: "--sasl-user needs --sasl-mechanism"},
		{name: "oauth without token", args: append(b, "--sasl-mechanism", "OAUTHBEARER"), error: "needs --sasl-token"},
		{name: "aws without credentials", args: append(b, "--sasl-mechanism", "AWS_MSK_IAM"), error: "needs AWS_ACCESS_KEY_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			brokers := fs.String("brokers", "", "")
			var sec Security
			sec.Register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			opts, err := sec.ClientOpts(*brokers != "")
			switch {
			case tc.error == "" && err != nil:
				t.Errorf("%v", err)
			case tc.error == "" && len(opts) != tc.opts:
				t.Errorf("%d client options, want %d", len(opts), tc.opts)
			case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
				t.Errorf("error %v, want one containing %q", err, tc.error)
			}
		})
	}
}
