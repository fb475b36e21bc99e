package config

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// S3Values are the settings of the s3 package store as written: the fields of its module
// (package_store s3 { … } in the Caddyfile). An empty field is unset: its RUNTIME_S3_*
// variable, then the default, applies.
type S3Values struct {
	// Endpoint is the store's URL, e.g. "https://<account>.r2.cloudflarestorage.com"; unset
	// for AWS S3.
	Endpoint string `json:"endpoint,omitempty"`
	// Bucket holds the archives; it must exist.
	Bucket string `json:"bucket,omitempty"`
	// Region is the region requests are signed for, e.g. "eu-west-1" ("auto" on R2).
	Region string `json:"region,omitempty"`
	// Prefix is the folder of the archives in the bucket, shared by the instances of one
	// cluster.
	Prefix string `json:"prefix,omitempty"`
	// AccessKeyID and SecretAccessKey are the store's credentials; write the secret as a
	// placeholder such as {env.RUNTIME_S3_SECRET_ACCESS_KEY} so it never lands in the adapted
	// JSON. Both unset: the AWS SDK's standard credential chain.
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	// PathStyle puts the bucket in the URL's path rather than its host name, as most
	// self-hosted stores need.
	PathStyle *bool `json:"path_style,omitempty"`
}

// StringFields are the written string settings of the s3 store, which may hold placeholders.
func (v *S3Values) StringFields() []*string {
	return []*string{&v.Endpoint, &v.Bucket, &v.Region, &v.Prefix, &v.AccessKeyID, &v.SecretAccessKey}
}

// Package stores: StoreLocal keeps units in the local folders only, StoreS3 shares their
// archives through an S3-compatible object store.
const (
	StoreLocal = "local"
	StoreS3    = "s3"
)

// StoreSettings are the effective settings of the package store (package_store).
type StoreSettings struct {
	Kind string     // StoreLocal, StoreS3, or the name of another store module
	S3   S3Settings // Kind StoreS3 only
}

// S3Settings are the effective settings of the s3 package store.
type S3Settings struct {
	Endpoint, Bucket, Region, Prefix string
	AccessKeyID, SecretAccessKey     string
	PathStyle                        bool
}

// StoreFromEnv returns the package store RUNTIME_PACKAGE_STORE selects, for a config that
// writes no package_store: StoreLocal (the default) or StoreS3.
func StoreFromEnv(getenv func(string) string) (string, error) {
	r := resolver{getenv: getenv}
	raw, fromEnv := r.pick("package_store", "")
	switch kind := strings.ToLower(raw); kind {
	case StoreLocal, StoreS3:
		return kind, nil
	}
	return "", r.fail("package_store", fromEnv, raw, errors.New("must be local or s3"))
}

// ResolveS3 resolves the settings of the s3 package store: each field v leaves unset comes
// from its RUNTIME_S3_* variable.
func ResolveS3(v S3Values, getenv func(string) string) (S3Settings, error) {
	var s S3Settings
	r := resolver{getenv: getenv}
	for _, f := range []struct {
		name    string
		written string
		to      *string
	}{{"endpoint", v.Endpoint, &s.Endpoint}, {"bucket", v.Bucket, &s.Bucket}, {"region", v.Region, &s.Region},
		{"prefix", v.Prefix, &s.Prefix}, {"access_key_id", v.AccessKeyID, &s.AccessKeyID}, {"secret_access_key", v.SecretAccessKey, &s.SecretAccessKey}} {
		*f.to, _ = r.pick(f.name, f.written)
	}
	if raw, fromEnv := r.pick("endpoint", v.Endpoint); raw != "" {
		if err := checkEndpoint(raw); err != nil {
			return s, r.fail("endpoint", fromEnv, "", err) // the value may hold a password: not shown
		}
	}
	if s.Bucket == "" {
		return s, r.fail("bucket", false, "", errors.New("a package store needs its bucket: write package_store s3 { bucket … } or set "+Lookup("bucket").Env))
	}
	if s.AccessKeyID != "" && s.SecretAccessKey == "" {
		return s, r.fail("secret_access_key", false, "", errors.New("access_key_id is set without it: set both, or neither for the AWS SDK's credential chain"))
	}
	if s.SecretAccessKey != "" && s.AccessKeyID == "" {
		return s, r.fail("access_key_id", false, "", errors.New("secret_access_key is set without it: set both, or neither for the AWS SDK's credential chain"))
	}
	if v.PathStyle != nil {
		s.PathStyle = *v.PathStyle
		return s, nil
	}
	raw, fromEnv := r.pick("path_style", "")
	on, err := ParseBool(raw)
	if err != nil {
		return s, r.fail("path_style", fromEnv, raw, err)
	}
	s.PathStyle = on
	return s, nil
}

// checkEndpoint checks the URL of an S3-compatible store: http or https, a host, and no
// credentials, which have settings of their own kept out of logs and errors.
func checkEndpoint(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.User != nil:
		return errors.New("must not carry credentials: set access_key_id and secret_access_key")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: use https:// (or http:// for a store on a private network)", u.Scheme)
	case u.Host == "":
		return errors.New("names no host")
	}
	return nil
}

// CheckStore checks the package store against the other process-wide settings of s:
// instances share the desired state of their units through the key store's primary, so a
// store needs key_store sync, and it takes archives of at most maxObject bytes. fromEnv says
// whether RUNTIME_PACKAGE_STORE chose the store.
func CheckStore(s Settings, fromEnv bool, maxObject int64) error {
	if s.PackageStore.Kind == StoreLocal || s.PackageStore.Kind == "" {
		return nil
	}
	r := resolver{}
	if s.KeyStore != "sync" {
		return r.fail("package_store", fromEnv, s.PackageStore.Kind, errors.New("needs key_store sync: the instances sharing a package store "+
			"learn which workers and plugins to serve from the key store's primary; write key_store sync { url … } or set RUNTIME_AUTH_DB_MODE=sync"))
	}
	if s.MaxUploadSize > maxObject {
		return r.fail("max_upload_size", false, fmt.Sprint(s.MaxUploadSize), fmt.Errorf("with a package store, at most %d bytes (5GiB), "+
			"the largest archive the store takes in one request", maxObject))
	}
	return nil
}
