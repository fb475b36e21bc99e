package testkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestS3 speaks to the server with the AWS SDK's S3 client, path-style as self-hosted stores
// want: an object put is read back byte for byte, listed, refused with wrong credentials, and
// still there after an outage; an altered object reads back altered.
func TestS3(t *testing.T) {
	t.Parallel()
	srv := StartS3(t)
	bucket := srv.Bucket(t, "units")
	client := func(secret string) *s3.Client {
		return s3.New(s3.Options{
			BaseEndpoint: aws.String(srv.Endpoint), Region: srv.Region, UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, secret, ""),
		})
	}
	c, ctx := client(srv.SecretKey), context.Background()
	body := bytes.Repeat([]byte("archive bytes "), 1000)
	key := "pkg/sha256/abc"
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put: %v\n%s", err, srv.Output())
	}
	get := func(c *s3.Client) ([]byte, error) {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}
	if got, err := get(c); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("get = %d bytes, %v; want the %d bytes put", len(got), err, len(body))
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("pkg/")})
	if err != nil || len(list.Contents) != 1 || *list.Contents[0].Key != key {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if _, err := get(client("wrong-secret")); err == nil {
		t.Fatal("a wrong secret read the object")
	}
	var missing *types.NoSuchKey
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("pkg/sha256/none")}); !errors.As(err, &missing) {
		t.Fatalf("a missing object = %v, want NoSuchKey", err)
	}

	srv.Stop()
	if _, err := get(c); err == nil {
		t.Fatal("the stopped server answered")
	}
	srv.Restart(t)
	if got, err := get(c); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("after the outage: %d bytes, %v", len(got), err)
	}
	if err := os.WriteFile(srv.Object(bucket, key), []byte("altered"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := get(c); err != nil || !strings.HasPrefix(string(got), "altered") {
		t.Fatalf("the altered object reads %q, %v", got, err)
	}
}

// TestStartOnATakenPort: a server whose port another process took between FreePort and its
// start exits; the start notices at once (not after its timeout) and starts it again on
// another port.
func TestStartOnATakenPort(t *testing.T) {
	t.Parallel()
	bin := VersityGWBinary(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s := &S3{AccessKey: "test-" + rand.Text()[:8], SecretKey: rand.Text(), root: t.TempDir()}
	s.server = server{out: &Buffer{}, dir: t.TempDir(), ready: s.answers,
		env: []string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}}
	t.Cleanup(s.Stop)
	var ports []int
	began := time.Now()
	s.runOnFreePort(t, func(port int) {
		if ports = append(ports, port); len(ports) == 1 {
			port = taken.Addr().(*net.TCPAddr).Port
		}
		s.Port, s.Endpoint = port, "http://127.0.0.1:"+strconv.Itoa(port)
		s.args = []string{bin, "--port", "127.0.0.1:" + strconv.Itoa(port), "posix", s.root}
	})
	if len(ports) != 2 || s.Port != ports[1] || s.answers() != nil {
		t.Fatalf("started on %d after trying %v; answers: %v", s.Port, ports, s.answers())
	}
	if d := time.Since(began); d >= startTimeout {
		t.Errorf("the start took %s: the exit on the taken port was not noticed", d)
	}
}
