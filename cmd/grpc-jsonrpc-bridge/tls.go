package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// keyPair is a certificate and key read from files and reread whenever
// their contents change, checked at every TLS handshake. A change that
// does not load (a file half written) keeps the last good pair and logs.
type keyPair struct {
	certFile, keyFile string
	log               *slog.Logger

	mu              sync.Mutex
	certPEM, keyPEM []byte
	cert            *tls.Certificate
}

func newKeyPair(certFile, keyFile string, log *slog.Logger) (*keyPair, error) {
	k := &keyPair{certFile: certFile, keyFile: keyFile, log: log}
	if _, err := k.get(); err != nil {
		return nil, err
	}
	return k, nil
}

// get returns the current pair, reloading it if the files changed.
func (k *keyPair) get() (*tls.Certificate, error) {
	certPEM, err1 := os.ReadFile(k.certFile)
	keyPEM, err2 := os.ReadFile(k.keyFile)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := errors.Join(err1, err2); err != nil {
		return k.keep(err)
	}
	if k.cert != nil && bytes.Equal(certPEM, k.certPEM) && bytes.Equal(keyPEM, k.keyPEM) {
		return k.cert, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return k.keep(fmt.Errorf("certificate %s with key %s: %w", k.certFile, k.keyFile, err))
	}
	if k.cert != nil {
		k.log.Info("reloaded a certificate", "cert_file", k.certFile)
	}
	k.cert, k.certPEM, k.keyPEM = &cert, certPEM, keyPEM
	return k.cert, nil
}

// keep answers a failed reload with the last good pair, if any.
func (k *keyPair) keep(err error) (*tls.Certificate, error) {
	if k.cert == nil {
		return nil, err
	}
	k.log.Warn("cannot reload a certificate; keeping the last good one", "error", err)
	return k.cert, nil
}

// caPool is a certificate pool read from a PEM file and reread whenever it
// changes, as keyPair is.
type caPool struct {
	file string
	log  *slog.Logger

	mu   sync.Mutex
	pem  []byte
	pool *x509.CertPool
}

func newCAPool(file string, log *slog.Logger) (*caPool, error) {
	c := &caPool{file: file, log: log}
	if _, err := c.get(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *caPool) get() (*x509.CertPool, error) {
	data, err := os.ReadFile(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && c.pool != nil && bytes.Equal(data, c.pem) {
		return c.pool, nil
	}
	if err == nil {
		pool := x509.NewCertPool()
		if pool.AppendCertsFromPEM(data) {
			if c.pool != nil {
				c.log.Info("reloaded a CA file", "file", c.file)
			}
			c.pool, c.pem = pool, data
			return pool, nil
		}
		err = fmt.Errorf("%s holds no PEM certificate", c.file)
	}
	if c.pool == nil {
		return nil, err
	}
	c.log.Warn("cannot reload a CA file; keeping the last good one", "error", err)
	return c.pool, nil
}

// listenerTLS is the TLS configuration of the HTTPS listener: its
// certificate, and the client CAs when client certificates are required,
// both reread when their files change.
func listenerTLS(t config.ListenerTLS, log *slog.Logger) (*tls.Config, error) {
	pair, err := newKeyPair(t.CertFile, t.KeyFile, log)
	if err != nil {
		return nil, fmt.Errorf("tls.cert_file: %w", err)
	}
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return pair.get()
		},
	}
	if t.ClientCAFile == "" {
		return base, nil
	}
	cas, err := newCAPool(t.ClientCAFile, log)
	if err != nil {
		return nil, fmt.Errorf("tls.client_ca_file: %w", err)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			pool, err := cas.get()
			if err != nil {
				return nil, err
			}
			c := base.Clone()
			c.ClientAuth = tls.RequireAndVerifyClientCert
			c.ClientCAs = pool
			return c, nil
		},
	}, nil
}

// backendCredentials are the TLS credentials of a backend connection. The
// server's certificate is verified against the CA file (reread when it
// changes) or the system's roots, for ServerName or the target's host; the
// client certificate, if any, is reread when it changes.
func backendCredentials(b config.Backend, log *slog.Logger) (credentials.TransportCredentials, error) {
	t := b.TLS
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CertFile != "" {
		pair, err := newKeyPair(t.CertFile, t.KeyFile, log)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.get()
		}
	}
	if t.CAFile == "" {
		return credentials.NewTLS(cfg), nil
	}
	cas, err := newCAPool(t.CAFile, log)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file: %w", err)
	}
	// The pool may change between handshakes, so verification is done
	// here, in full, instead of by crypto/tls with a fixed RootCAs.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		pool, err := cas.get()
		if err != nil {
			return err
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the backend sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: pool, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("backend %q: its certificate is not trusted by tls.ca_file %s: %w", b.Name, t.CAFile, err)
		}
		return nil
	}
	return credentials.NewTLS(cfg), nil
}
