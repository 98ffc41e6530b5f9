package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is the TLS and SASL settings shared by every command that talks
// to a real cluster (lanes-lab demo and bench, lanes dlq); ClientOpts turns
// them into franz-go options, the same ones docs/security.md shows.
type Security struct {
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string

	mechanism string
	user      string
	password  string
	token     string
}

// saslMechanisms are the accepted --sasl-mechanism values.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"}

// Register adds the security flags to fs. Secrets default to environment
// variables so that they need not appear in the process list.
func (s *Security) Register(fs *flag.FlagSet) {
	fs.BoolVar(&s.tls, "tls", false, "connect with TLS (implied by any other --tls-* flag); the system's CAs unless --tls-ca")
	fs.StringVar(&s.tlsCA, "tls-ca", "", "PEM `FILE` of the CA(s) to trust instead of the system's")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM `FILE` of the client certificate (mutual TLS; with --tls-key)")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM `FILE` of the client certificate's private key (with --tls-cert)")
	fs.StringVar(&s.tlsServerName, "tls-server-name", "", "the `NAME` to verify the brokers' certificates against (default: the host dialed)")
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "SASL `MECHANISM`: "+strings.Join(saslMechanisms, ", "))
	fs.StringVar(&s.user, "sasl-user", "", "SASL `USER` (PLAIN, SCRAM); default $LANES_SASL_USER")
	fs.StringVar(&s.password, "sasl-password", "", "SASL `PASSWORD` (PLAIN, SCRAM); default $LANES_SASL_PASSWORD")
	fs.StringVar(&s.token, "sasl-token", "", "OAUTHBEARER `TOKEN`; default $LANES_SASL_TOKEN")
}

// used reports whether any security setting was given.
func (s *Security) used() bool {
	return s.tls || s.tlsCA != "" || s.tlsCert != "" || s.tlsKey != "" || s.tlsServerName != "" || s.mechanism != ""
}

// ClientOpts validates the settings and returns the franz-go options that
// apply them (nil when none were given). brokers says whether a real
// cluster was named: the embedded broker speaks neither TLS nor SASL.
func (s *Security) ClientOpts(brokers bool) ([]kgo.Opt, error) {
	if !s.used() {
		for _, v := range []struct{ flag, value string }{{"--sasl-user", s.user}, {"--sasl-password", s.password}, {"--sasl-token", s.token}} {
			if v.value != "" {
				return nil, fmt.Errorf("%s needs --sasl-mechanism (%s)", v.flag, strings.Join(saslMechanisms, ", "))
			}
		}
		return nil, nil
	}
	for _, v := range []struct {
		dst *string
		env string
	}{{&s.user, "LANES_SASL_USER"}, {&s.password, "LANES_SASL_PASSWORD"}, {&s.token, "LANES_SASL_TOKEN"}} {
		if *v.dst == "" {
			*v.dst = os.Getenv(v.env)
		}
	}
	if !brokers {
		return nil, errors.New("--tls-* and --sasl-* flags need --brokers (the embedded broker speaks neither TLS nor SASL)")
	}
	var opts []kgo.Opt
	if s.tls || s.tlsCA != "" || s.tlsCert != "" || s.tlsKey != "" || s.tlsServerName != "" {
		cfg, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.mechanism != "" {
		m, err := s.saslMechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s *Security) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.tlsServerName}
	if s.tlsCA != "" {
		pem, err := os.ReadFile(s.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", s.tlsCA)
		}
	}
	if s.tlsCert != "" && s.tlsKey == "" {
		return nil, fmt.Errorf("--tls-key: missing; --tls-cert %s needs its private key", s.tlsCert)
	}
	if s.tlsKey != "" && s.tlsCert == "" {
		return nil, fmt.Errorf("--tls-cert: missing; --tls-key %s needs its certificate", s.tlsKey)
	}
	if s.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func (s *Security) saslMechanism() (sasl.Mechanism, error) {
	mech := strings.ToUpper(s.mechanism)
	needUser := func() error {
		if s.user == "" {
			return fmt.Errorf("--sasl-user: missing; --sasl-mechanism %s needs a user (--sasl-user or $LANES_SASL_USER)", mech)
		}
		if s.password == "" {
			return fmt.Errorf("--sasl-password: missing; --sasl-mechanism %s needs a password (--sasl-password or $LANES_SASL_PASSWORD)", mech)
		}
		return nil
	}
	switch mech {
	case "PLAIN":
		if err := needUser(); err != nil {
			return nil, err
		}
		return plain.Auth{User: s.user, Pass: s.password}.AsMechanism(), nil
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		if err := needUser(); err != nil {
			return nil, err
		}
		a := scram.Auth{User: s.user, Pass: s.password}
		if mech == "SCRAM-SHA-256" {
			return a.AsSha256Mechanism(), nil
		}
		return a.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		if s.token == "" {
			return nil, errors.New("--sasl-mechanism OAUTHBEARER needs --sasl-token (or $LANES_SASL_TOKEN)")
		}
		return oauth.Auth{Token: s.token}.AsMechanism(), nil
	case "AWS_MSK_IAM":
		// The standard AWS variables, read at each connection so that
		// rotated session credentials are picked up.
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
			return nil, errors.New("--sasl-mechanism AWS_MSK_IAM needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment")
		}
		return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
			return aws.Auth{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
				SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
		}), nil
	}
	return nil, fmt.Errorf("--sasl-mechanism %q: want one of %s", s.mechanism, strings.Join(saslMechanisms, ", "))
}
