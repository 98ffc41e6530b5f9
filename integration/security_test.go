package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lanesdev/lanes/lanestest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// securedEnv returns the named variables (set by kafka.sh env). On kfake
// (LANES_BROKERS unset) the test skips; on the real broker a missing one
// skips it too, or fails it with CI=true.
func securedEnv(t *testing.T, names ...string) []string {
	t.Helper()
	if os.Getenv("LANES_BROKERS") == "" {
		t.Skip("the secured listeners exist only on the real broker (make test-kafka)")
	}
	out := make([]string, len(names))
	for i, n := range names {
		if out[i] = os.Getenv(n); out[i] == "" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not set: run the suite with kafka.sh's environment (make test-kafka)", n)
			}
			t.Skipf("%s is not set: the secured listeners exist only on the real broker (make test-kafka)", n)
		}
	}
	return out
}

// tlsOpts is docs/security.md's TLS snippet: trust the test CA, present the
// client certificate (the broker's TLS listener requires one).
func tlsOpts(t *testing.T) ([]string, []kgo.Opt) {
	env := securedEnv(t, "LANES_TLS_BROKERS", "LANES_TLS_CA", "LANES_TLS_CERT", "LANES_TLS_KEY")
	caPEM, err := os.ReadFile(env[1])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no certificate", env[1])
	}
	pair, err := tls.LoadX509KeyPair(env[2], env[3])
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{pair}}
	return strings.Split(env[0], ","), []kgo.Opt{kgo.DialTLSConfig(cfg)}
}

// saslOpts returns the SASL listener and the mechanism mk builds from the
// test user.
func saslOpts(t *testing.T, mk func(user, pass string) sasl.Mechanism) ([]string, []kgo.Opt, []string) {
	env := securedEnv(t, "LANES_SASL_BROKERS", "LANES_SASL_USER", "LANES_SASL_PASSWORD")
	return strings.Split(env[0], ","), []kgo.Opt{kgo.SASL(mk(env[1], env[2]))}, env[1:]
}

func scram512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

func plainMech(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

// The seed scenario, smaller (5,000 messages over 10 sessions, 10%
// transient errors), through each secured listener of the real broker:
// topics created, produced, consumed, dead-lettered and committed over TLS
// with a client certificate, over SASL/SCRAM-SHA-512 and over SASL/PLAIN.
// Each also checks that the listener refuses a client without the right
// credentials, so a listener that does not check them fails the test.
func TestSecuredListeners(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) (brokers []string, opts, wrong []kgo.Opt)
	}{
		{"tls", func(t *testing.T) ([]string, []kgo.Opt, []kgo.Opt) {
			b, opts := tlsOpts(t)
			// Trusting the CA but showing no certificate.
			roots := x509.NewCertPool()
			caPEM, _ := os.ReadFile(os.Getenv("LANES_TLS_CA"))
			roots.AppendCertsFromPEM(caPEM)
			return b, opts, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots})}
		}},
		{"scram-sha-512", func(t *testing.T) ([]string, []kgo.Opt, []kgo.Opt) {
			b, opts, creds := saslOpts(t, scram512)
			return b, opts, []kgo.Opt{kgo.SASL(scram512(creds[0], creds[1]+"-wrong"))}
		}},
		{"plain", func(t *testing.T) ([]string, []kgo.Opt, []kgo.Opt) {
			b, opts, creds := saslOpts(t, plainMech)
			return b, opts, []kgo.Opt{kgo.SASL(plainMech(creds[0], creds[1]+"-wrong"))}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brokers, opts, wrong := tc.setup(t)
			refused(t, brokers, wrong)
			c := &cluster{Broker: lanestest.ConnectBroker(brokers, opts...), brokers: brokers, real: true}
			topic, dlq := c.topics(t, 3)
			l := lanestest.NewLedger()
			start := time.Now()
			c.produce(t, topic, sessionNames(10), 500, l)
			group := "secured-" + tc.name
			startMember(t, "m1", c.consumerConfig(group, topic, dlq), handler("m1", l, faults{transient: 0.10}))
			waitFinished(t, l, 5_000, 3*time.Minute)
			c.readDLQ(t, dlq, l)
			assertClean(t, c, l.Report(), time.Since(start), false)
		})
	}
}

// refused fails unless a client with opts cannot talk to brokers.
func refused(t *testing.T, brokers []string, opts []kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequestRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("the listener accepted a client without the right credentials")
	} else {
		t.Logf("without the right credentials: %v", err)
	}
}
