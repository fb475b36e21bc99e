package config

import (
	"strings"
	"testing"
)

func TestStoreFromEnv(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
		err  []string
	}{
		{nil, StoreLocal, nil},
		{map[string]string{"RUNTIME_PACKAGE_STORE": "s3"}, StoreS3, nil},
		{map[string]string{"RUNTIME_PACKAGE_STORE": " S3 "}, StoreS3, nil},
		{map[string]string{"RUNTIME_PACKAGE_STORE": "local"}, StoreLocal, nil},
		{map[string]string{"RUNTIME_PACKAGE_STORE": "minio"}, "", []string{`invalid package_store "minio"`, "RUNTIME_PACKAGE_STORE", "local or s3"}},
	}
	for _, tt := range tests {
		t.Run(tt.env["RUNTIME_PACKAGE_STORE"], func(t *testing.T) {
			got, err := StoreFromEnv(envMap(tt.env))
			checkErr(t, err, tt.err)
			if got != tt.want {
				t.Fatalf("StoreFromEnv = %q, want %q", got, tt.want)
			}
		})
	}
}

// checkErr fails unless err contains every string of want, or is nil when want is.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted, want an error containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestResolveS3(t *testing.T) {
	yes, no := true, false
	const secret = "the-secret-access-key"
	full := map[string]string{
		"RUNTIME_S3_ENDPOINT": "http://127.0.0.1:7070", "RUNTIME_S3_BUCKET": "units", "RUNTIME_S3_REGION": "eu-west-1",
		"RUNTIME_S3_PREFIX": "prod", "RUNTIME_S3_ACCESS_KEY_ID": "AKID", "RUNTIME_S3_SECRET_ACCESS_KEY": secret, "RUNTIME_S3_PATH_STYLE": "true",
	}
	fromEnv := S3Settings{Endpoint: "http://127.0.0.1:7070", Bucket: "units", Region: "eu-west-1", Prefix: "prod",
		AccessKeyID: "AKID", SecretAccessKey: secret, PathStyle: true}
	tests := []struct {
		name   string
		values S3Values
		env    map[string]string
		want   S3Settings
		err    []string
	}{
		{"all from the environment", S3Values{}, full, fromEnv, nil},
		{"written fields win, field by field", S3Values{Bucket: "other", Prefix: "staging", PathStyle: &no}, full,
			S3Settings{Endpoint: "http://127.0.0.1:7070", Bucket: "other", Region: "eu-west-1", Prefix: "staging",
				AccessKeyID: "AKID", SecretAccessKey: secret}, nil},
		{"bucket alone: AWS S3 and the credential chain", S3Values{Bucket: "b"}, nil, S3Settings{Bucket: "b"}, nil},
		{"path_style written", S3Values{Bucket: "b", PathStyle: &yes}, map[string]string{"RUNTIME_S3_PATH_STYLE": "nonsense"},
			S3Settings{Bucket: "b", PathStyle: true}, nil},
		{"path_style false from the environment", S3Values{Bucket: "b"}, map[string]string{"RUNTIME_S3_PATH_STYLE": "FALSE"}, S3Settings{Bucket: "b"}, nil},
		{"no bucket", S3Values{Endpoint: "http://h"}, nil, S3Settings{},
			[]string{"invalid package_store s3 bucket", "RUNTIME_S3_BUCKET"}},
		{"path_style on from the environment", S3Values{Bucket: "b"}, map[string]string{"RUNTIME_S3_PATH_STYLE": "on"}, S3Settings{Bucket: "b", PathStyle: true}, nil},
		{"path_style from the environment", S3Values{Bucket: "b"}, map[string]string{"RUNTIME_S3_PATH_STYLE": "maybe"}, S3Settings{},
			[]string{`invalid package_store s3 path_style "maybe" (from environment variable RUNTIME_S3_PATH_STYLE)`, "on, off, true, false, yes or no"}},
		{"endpoint with credentials", S3Values{Bucket: "b", Endpoint: "https://user:pa55word@h"}, nil, S3Settings{},
			[]string{"invalid package_store s3 endpoint:", "must not carry credentials"}},
		{"endpoint scheme from the environment", S3Values{Bucket: "b"}, map[string]string{"RUNTIME_S3_ENDPOINT": "ftp://h"}, S3Settings{},
			[]string{"invalid package_store s3 endpoint (from environment variable RUNTIME_S3_ENDPOINT)", `scheme "ftp"`}},
		{"endpoint without a host", S3Values{Bucket: "b", Endpoint: "http://"}, nil, S3Settings{}, []string{"endpoint", "names no host"}},
		{"key id without secret", S3Values{Bucket: "b", AccessKeyID: "AKID"}, nil, S3Settings{},
			[]string{"invalid package_store s3 secret_access_key", "access_key_id is set without it"}},
		{"secret without key id", S3Values{Bucket: "b"}, map[string]string{"RUNTIME_S3_SECRET_ACCESS_KEY": secret}, S3Settings{},
			[]string{"invalid package_store s3 access_key_id", "secret_access_key is set without it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveS3(tt.values, envMap(tt.env))
			checkErr(t, err, tt.err)
			if err != nil {
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "pa55word") {
					t.Errorf("the error shows a secret: %v", err)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("ResolveS3 = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckStore(t *testing.T) {
	const max = 5 << 30
	s3 := StoreSettings{Kind: StoreS3, S3: S3Settings{Bucket: "b"}}
	tests := []struct {
		name    string
		s       Settings
		fromEnv bool
		err     []string
	}{
		{"local needs nothing", Settings{PackageStore: StoreSettings{Kind: StoreLocal}, MaxUploadSize: 8 << 30}, false, nil},
		{"s3 with sync", Settings{PackageStore: s3, KeyStore: "sync", MaxUploadSize: max}, false, nil},
		{"s3 without sync", Settings{PackageStore: s3, KeyStore: "local", MaxUploadSize: 1}, false,
			[]string{`invalid package_store "s3": needs key_store sync`, "primary"}},
		{"s3 from the environment without sync", Settings{PackageStore: s3, KeyStore: "local", MaxUploadSize: 1}, true,
			[]string{"(from environment variable RUNTIME_PACKAGE_STORE)", "key_store sync"}},
		{"uploads larger than the store takes", Settings{PackageStore: s3, KeyStore: "sync", MaxUploadSize: max + 1}, false,
			[]string{"invalid max_upload_size", "5GiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, CheckStore(tt.s, tt.fromEnv, max), tt.err)
		})
	}
}
