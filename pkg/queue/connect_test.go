package queue_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/hpcq/hpcq/internal/testutil"
	"github.com/hpcq/hpcq/pkg/queue"
)

// startAuthServer runs a real nats-server (the library) with the given
// authentication options on a random loopback port.
func startAuthServer(t *testing.T, set func(o *server.Options)) string {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir()}
	set(o)
	s, err := server.NewServer(o)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

func connectAndUse(t *testing.T, c queue.ConnConfig) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.ConnectTimeout = 2 * time.Second
	nc, err := queue.Connect(ctx, c, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = queue.New(ctx, nc, queue.Options{}, nil)
	return err
}

func TestConnectUserPassword(t *testing.T) {
	url := startAuthServer(t, func(o *server.Options) { o.Username, o.Password = "hpcq", "s3cret" })
	require.NoError(t, connectAndUse(t, queue.ConnConfig{URL: url, User: "hpcq", Password: "s3cret"}))
	err := connectAndUse(t, queue.ConnConfig{URL: url, User: "hpcq", Password: "wrong"})
	require.ErrorContains(t, err, "Authorization")
	require.NotContains(t, err.Error(), "wrong", "the password never appears in errors")
}

func TestConnectToken(t *testing.T) {
	url := startAuthServer(t, func(o *server.Options) { o.Authorization = "tok-123" })
	require.NoError(t, connectAndUse(t, queue.ConnConfig{URL: url, Token: "tok-123"}))
	require.Error(t, connectAndUse(t, queue.ConnConfig{URL: url}))
}

func TestConnectNKey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))
	url := startAuthServer(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	require.NoError(t, connectAndUse(t, queue.ConnConfig{URL: url, NKeyFile: seedFile}))
	_, err = queue.Connect(context.Background(), queue.ConnConfig{URL: url, NKeyFile: filepath.Join(t.TempDir(), "missing")}, nil)
	require.ErrorContains(t, err, "nkey file")
}

func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := testutil.SelfSigned(t, dir)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	url := startAuthServer(t, func(o *server.Options) {
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		o.TLS = true
	})
	require.NoError(t, connectAndUse(t, queue.ConnConfig{URL: url, TLSCA: certFile}))
	err = connectAndUse(t, queue.ConnConfig{URL: url}) // no CA: the certificate is not trusted
	require.Error(t, err)
	_, err = queue.Connect(context.Background(), queue.ConnConfig{URL: url, TLSCert: certFile}, nil)
	require.ErrorIs(t, err, queue.ErrInvalidOption)
}

// TestConnectCreds: a JWT credentials file against a server in operator
// mode, with JetStream enabled for the account.
func TestConnectCreds(t *testing.T) {
	okp, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opub, _ := okp.PublicKey()
	skp, err := nkeys.CreateAccount() // the system account
	require.NoError(t, err)
	spub, _ := skp.PublicKey()
	sjwt, err := jwt.NewAccountClaims(spub).Encode(okp)
	require.NoError(t, err)
	oc := jwt.NewOperatorClaims(opub)
	oc.SystemAccount = spub
	ojwt, err := oc.Encode(okp)
	require.NoError(t, err)
	opClaims, err := jwt.DecodeOperatorClaims(ojwt)
	require.NoError(t, err)

	akp, err := nkeys.CreateAccount()
	require.NoError(t, err)
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	ajwt, err := ac.Encode(okp)
	require.NoError(t, err)

	ukp, err := nkeys.CreateUser()
	require.NoError(t, err)
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	ujwt, err := uc.Encode(akp)
	require.NoError(t, err)
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	require.NoError(t, err)
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	require.NoError(t, os.WriteFile(credsFile, creds, 0o600))

	resolver := &server.MemAccResolver{}
	require.NoError(t, resolver.Store(apub, ajwt))
	require.NoError(t, resolver.Store(spub, sjwt))
	url := startAuthServer(t, func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
		o.SystemAccount = spub
	})
	require.NoError(t, connectAndUse(t, queue.ConnConfig{URL: url, CredsFile: credsFile}))
	require.Error(t, connectAndUse(t, queue.ConnConfig{URL: url}), "no credentials, no entry")
}

// TestPermissionViolationExplained: a request the user may not publish is
// dropped by the server, so the client sees only its deadline pass; hpcq
// says which permission was missing and stops asking (a declaration would
// otherwise be asked again until its context ends).
func TestPermissionViolationExplained(t *testing.T) {
	url := startAuthServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "narrow", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"$JS.API.INFO", "$JS.API.STREAM.INFO.*"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
		}}}
	})
	err := connectAndUse(t, queue.ConnConfig{URL: url, User: "narrow", Password: "pw"})
	require.Error(t, err)
	require.ErrorContains(t, err, "the NATS server refused this user")
	require.ErrorContains(t, err, `Permissions Violation for Publish to "$JS.API.STREAM.`)
	require.NotErrorIs(t, err, context.Canceled)
}

// TestNoRoomForTheLayers: a server whose JetStream file store cannot hold
// the layers' bound (as on a disk with little free: the server's default
// store is 75% of it) refuses the bucket; the error says why and what to
// change, and a bound that fits is made. A store that exists is used by the
// next process even where the server could not reserve its bound twice
// (it checks that before it finds the store).
func TestNoRoomForTheLayers(t *testing.T) {
	connect := func(url string, o queue.Options) error {
		nc, err := nats.Connect(url)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		q, err := queue.New(context.Background(), nc, o, testutil.Logger(t))
		if err == nil {
			t.Cleanup(q.Close)
			_, err = q.Layers(context.Background())
		}
		return err
	}
	small := startAuthServer(t, func(o *server.Options) { o.JetStreamMaxStore = 1536 << 20 })
	err := connect(small, queue.Options{})
	require.ErrorContains(t, err, "object store HPCQ_LAYERS")
	require.ErrorContains(t, err, "reserves this store's bound (8192 MB) when it is made")
	require.ErrorContains(t, err, "or lower HPCQ_LAYERS_MAX_MB")
	require.NoError(t, connect(small, queue.Options{LayersMaxBytes: 256 << 20}))

	// Room for the bounds once (1 GiB of logs, 8 GiB of layers), not twice.
	once := startAuthServer(t, func(o *server.Options) { o.JetStreamMaxStore = 10 << 30 })
	for process := range 3 {
		require.NoError(t, connect(once, queue.Options{}), "process %d", process+1)
	}
}
