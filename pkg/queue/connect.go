package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig says how to reach an external NATS server. At most one of
// Token, User/Password, NKeyFile and CredsFile should be set.
type ConnConfig struct {
	// URL of the server(s), comma separated, e.g. nats://host:4222.
	URL string
	// Name of the connection, shown by the server's monitoring.
	Name string
	// User and Password for user/password authentication.
	User, Password string
	// Token for token authentication.
	Token string
	// NKeyFile is a file holding an nkey seed (SU...).
	NKeyFile string
	// CredsFile is a JWT user credentials file.
	CredsFile string
	// TLSCA is a PEM file of CAs to trust; TLSCert and TLSKey a client
	// certificate for mutual TLS.
	TLSCA, TLSCert, TLSKey string
	// ConnectTimeout defaults to 5s.
	ConnectTimeout time.Duration
}

func (c ConnConfig) String() string {
	auth := "none"
	switch {
	case c.CredsFile != "":
		auth = "creds"
	case c.NKeyFile != "":
		auth = "nkey"
	case c.Token != "":
		auth = "token"
	case c.User != "":
		auth = "user"
	}
	return fmt.Sprintf("url=%s auth=%s tls=%t", c.URL, auth, c.TLSCA != "" || c.TLSCert != "")
}

// Connect opens a connection to an external server. It reconnects forever
// on its own once connected; disconnections are logged. Secrets never reach
// the log.
func Connect(ctx context.Context, c ConnConfig, log *slog.Logger) (*nats.Conn, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("%w: NATS URL is empty (set HPCQ_NATS_URL or --nats-url)", ErrInvalidOption)
	}
	if log == nil {
		log = slog.Default()
	}
	n := 0
	for _, set := range []bool{c.Token != "", c.User != "", c.NKeyFile != "", c.CredsFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: more than one NATS authentication method is set (token, user, nkey, creds)", ErrInvalidOption)
	}
	timeout := c.ConnectTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats async error", "err", err)
			noteRefusal(nc, err)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) { refusals.Delete(nc) }),
	}
	switch {
	case c.Token != "":
		opts = append(opts, nats.Token(c.Token))
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("queue: nkey file %s: %w", c.NKeyFile, err)
		}
		opts = append(opts, o)
	case c.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" || c.TLSKey != "" {
		if c.TLSCert == "" || c.TLSKey == "" {
			return nil, fmt.Errorf("%w: TLS client certificate needs both cert and key files", ErrInvalidOption)
		}
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("queue: connect to NATS (%s): %w", c, err)
	}
	return nc, nil
}

// refusals holds, per connection, the last permission violation its
// server reported (a refusal): the server drops a request the user may not
// publish, and the client would only see its deadline pass.
var refusals sync.Map // *nats.Conn -> refusal

type refusal struct {
	err error
	at  time.Time
}

func noteRefusal(nc *nats.Conn, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		refusals.Store(nc, refusal{err: err, at: time.Now()})
	}
}

// refused is the permission violation nc's server reported since since
// (nil if none): what explains a request that got no answer.
func refused(nc *nats.Conn, since time.Time) error {
	if nc == nil {
		return nil
	}
	v, ok := refusals.Load(nc)
	if !ok {
		return nil
	}
	r := v.(refusal)
	if r.at.Before(since) {
		return nil
	}
	return r.err
}

// explain adds to err, a request that got no answer, the permission
// violation the server reported meanwhile, if any: the NATS user lacks a
// permission (deploy/slurm/README.md, "Credentials", lists each role's).
func explain(nc *nats.Conn, err error, since time.Time) error {
	if err == nil || !Transient(err) {
		return err
	}
	if r := refused(nc, since); r != nil {
		return fmt.Errorf("%w (the NATS server refused this user: %v)", err, r)
	}
	return err
}
