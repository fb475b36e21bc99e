package packagestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestCheck starts a store with each thing that can be wrong at start-up: each gives its own
// class and a message that says what is wrong, and none shows the secret.
func TestCheck(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	bucket := srv.Bucket(t, "units")
	for _, tc := range []struct {
		name string
		o    Options
		kind error
		want []string
	}{
		{"ready", Options{Bucket: bucket}, nil, nil},
		{"missing bucket", Options{Bucket: "nope"}, ErrNoBucket, []string{`bucket "nope"`, "does not exist", "NoSuchBucket", srv.Endpoint}},
		{"wrong secret", Options{Bucket: bucket, AccessKeyID: srv.AccessKey, SecretAccessKey: "wrong-" + srv.SecretKey}, ErrDenied, []string{"refused the credentials", "SignatureDoesNotMatch", "HTTP 403"}},
		{"unknown access key", Options{Bucket: bucket, AccessKeyID: "nobody", SecretAccessKey: srv.SecretKey}, ErrDenied, []string{"refused the credentials", "access key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := open(t, srv, tc.o)
			err := s.Check(context.Background())
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("check = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("check = %v, want %v", err, tc.kind)
			}
			for _, other := range []error{ErrNoBucket, ErrDenied, ErrUnavailable, ErrNotFound} {
				if other != tc.kind && errors.Is(err, other) {
					t.Errorf("check = %v, also %v", err, other)
				}
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
			if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), srv.SecretKey) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

// TestOutage stops the server: every operation fails with ErrUnavailable, and the start-up
// check says the endpoint is unreachable after at most the three attempts the retryer allows
// (no retry storm); once the server is back the same store works again.
func TestOutage(t *testing.T) {
	t.Parallel()
	srv := testkit.StartS3(t)
	s, requests := open(t, srv, Options{Bucket: srv.Bucket(t, "units")})
	ctx := context.Background()
	body := []byte("an archive")
	sum := sha256.Sum256(body)
	if err := s.Put(ctx, sum, int64(len(body)), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("another"))

	srv.Stop()
	requests.take()
	err := s.Check(ctx)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("check = %v, want ErrUnavailable saying the endpoint is unreachable", err)
	}
	if got := requests.take(); got[http.MethodGet] < 1 || got[http.MethodGet] > attempts {
		t.Fatalf("check sent %v, want 1 to %d attempts", got, attempts)
	}
	for name, err := range map[string]error{
		"put":    s.Put(ctx, other, 7, strings.NewReader("another")),
		"open":   func() error { _, err := s.Open(ctx, sum, int64(len(body))); return err }(),
		"has":    func() error { _, err := s.Has(ctx, sum); return err }(),
		"delete": s.Delete(ctx, sum),
		"list":   func() error { _, err := firstOf(s); return err }(),
	} {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s during the outage = %v, want ErrUnavailable", name, err)
		}
	}

	srv.Restart(t)
	if err := s.Check(ctx); err != nil {
		t.Fatalf("check after the outage: %v", err)
	}
	if got, err := readAll(t, s, sum, int64(len(body))); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("open after the outage = %q, %v", got, err)
	}
}

func firstOf(s Store) (Object, error) {
	for o, err := range s.List(context.Background()) {
		return o, err
	}
	return Object{}, nil
}

// TestCredentialChain leaves the keys out: the AWS SDK's standard chain supplies them, here
// from the environment, and with nothing to find Check says the chain found none. (Not
// parallel: it sets the process's environment.)
func TestCredentialChain(t *testing.T) {
	srv := testkit.StartS3(t)
	bucket := srv.Bucket(t, "units")
	empty := filepath.Join(t.TempDir(), "none")
	os.WriteFile(empty, nil, 0o600)
	t.Setenv("AWS_CONFIG_FILE", empty)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	o := Options{Endpoint: srv.Endpoint, Bucket: bucket, Region: srv.Region, PathStyle: true}

	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	s, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); err != nil {
		t.Fatalf("check with the keys in the environment: %v", err)
	}

	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if s, err = New(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(context.Background()); !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "credential chain") {
		t.Fatalf("check without any credentials = %v, want ErrDenied naming the credential chain", err)
	}
}

// TestOptionsRedacted prints and logs the options every usual way: the secret access key
// never shows, the rest does.
func TestOptionsRedacted(t *testing.T) {
	t.Parallel()
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	o := Options{Endpoint: "https://s3.example", Bucket: "units", Region: "auto", Prefix: "prod",
		AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: secret, PathStyle: true}
	var slogOut, zapOut bytes.Buffer
	slog.New(slog.NewJSONHandler(&slogOut, nil)).Info("store", "options", o)
	zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&zapOut), zap.InfoLevel)).
		Info("store", zap.Any("options", o), zap.Object("object", o), zap.Stringer("stringer", o))
	for name, out := range map[string]string{
		"String": o.String(), "%v": fmt.Sprintf("%v", o), "%+v": fmt.Sprintf("%+v", o), "%#v": fmt.Sprintf("%#v", o),
		"%v of a pointer": fmt.Sprintf("%v", &o), "slog": slogOut.String(), "zap": zapOut.String(),
	} {
		if strings.Contains(out, secret) || strings.Contains(out, secret[:12]) {
			t.Errorf("%s shows the secret: %s", name, out)
		}
		if !strings.Contains(out, "AKIDEXAMPLE") || !strings.Contains(out, "units") || !strings.Contains(out, redacted) {
			t.Errorf("%s does not show the options: %s", name, out)
		}
	}
	if !json.Valid(bytes.TrimSpace(slogOut.Bytes())) {
		t.Errorf("slog wrote %s", slogOut.String())
	}
}

// TestOptionsInvalid refuses options no store can work with, naming what is wrong and never
// echoing a password written into the endpoint.
func TestOptionsInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no bucket", Options{Endpoint: "http://127.0.0.1:1"}, "bucket is required"},
		{"key id alone", Options{Bucket: "b", AccessKeyID: "id"}, "go together"},
		{"secret alone", Options{Bucket: "b", SecretAccessKey: "hunter2-secret"}, "go together"},
		{"credentials in the endpoint", Options{Bucket: "b", Endpoint: "https://id:hunter2-secret@s3.example"}, "must not carry credentials"},
		{"not http", Options{Bucket: "b", Endpoint: "ftp://s3.example"}, "not an http:// or https:// URL"},
		{"no host", Options{Bucket: "b", Endpoint: "https://"}, "not an http:// or https:// URL"},
		{"unparsable with a password", Options{Bucket: "b", Endpoint: "https://id:hunter2-secret@s3.example:port/"}, "not a URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("new = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}
