package packagestore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
	"go.uber.org/zap/zapcore"
)

const (
	// dialTimeout bounds connecting to the store, so an endpoint that drops packets fails
	// in seconds rather than the system's minutes.
	dialTimeout = 5 * time.Second
	// answerTimeout bounds the wait for a response's headers once a request is sent, its
	// body included (a store may checksum a large body before it answers).
	answerTimeout = time.Minute
	// requestTimeout bounds each request without a body to stream (HEAD, LIST page, DELETE,
	// the start-up check), retries included.
	requestTimeout = 30 * time.Second
	// stallTimeout is how long an archive's transfer may make no progress before it fails;
	// a slow but moving transfer of any size goes on.
	stallTimeout = time.Minute
	// attempts and maxBackoff bound the SDK's retries: a failing store answers within
	// seconds, and the caller (an upload, the reconciler) decides what to do next.
	attempts   = 3
	maxBackoff = 2 * time.Second
	// defaultRegion is the region requests are signed for when neither the options nor the
	// SDK's environment name one; self-hosted stores accept it.
	defaultRegion = "us-east-1"
)

// Options configure the S3-compatible store. Empty keys leave the credentials to the AWS
// SDK's standard chain (environment, shared files, the instance's role).
type Options struct {
	Endpoint        string // the store's URL; empty for AWS S3
	Bucket          string // must exist
	Region          string // empty: the SDK's (AWS_REGION, shared config), else us-east-1
	Prefix          string // the folder of the objects, shared by the instances of one cluster
	AccessKeyID     string
	SecretAccessKey string
	PathStyle       bool // bucket in the path, not the host name (most self-hosted stores)
}

// redacted stands for a secret that is set.
const redacted = "[redacted]"

func (o Options) secret() string {
	if o.SecretAccessKey == "" {
		return ""
	}
	return redacted
}

// String shows the options with the secret access key redacted.
func (o Options) String() string {
	return fmt.Sprintf("s3 endpoint=%q bucket=%q region=%q prefix=%q access_key_id=%q secret_access_key=%q path_style=%t",
		o.Endpoint, o.Bucket, o.Region, o.Prefix, o.AccessKeyID, o.secret(), o.PathStyle)
}

// GoString keeps %#v from printing the secret.
func (o Options) GoString() string { return "packagestore.Options{" + o.String() + "}" }

// LogValue logs the options with the secret access key redacted.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(slog.String("endpoint", o.Endpoint), slog.String("bucket", o.Bucket),
		slog.String("region", o.Region), slog.String("prefix", o.Prefix),
		slog.String("access_key_id", o.AccessKeyID), slog.String("secret_access_key", o.secret()),
		slog.Bool("path_style", o.PathStyle))
}

// MarshalLogObject logs the options with zap (Caddy's logger), the secret redacted.
func (o Options) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("endpoint", o.Endpoint)
	enc.AddString("bucket", o.Bucket)
	enc.AddString("region", o.Region)
	enc.AddString("prefix", o.Prefix)
	enc.AddString("access_key_id", o.AccessKeyID)
	enc.AddString("secret_access_key", o.secret())
	enc.AddBool("path_style", o.PathStyle)
	return nil
}

// validate refuses options no store can work with, naming the option.
func (o Options) validate() error {
	if o.Bucket == "" {
		return errors.New("package store: the bucket is required")
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		return errors.New("package store: the access key id and the secret access key go together: set both, or neither for the AWS SDK's credential chain")
	}
	if o.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(o.Endpoint)
	switch {
	case err != nil:
		// url's error quotes the URL, which may hold a password.
		return errors.New("package store: the endpoint is not a URL")
	case u.User != nil:
		return errors.New("package store: the endpoint must not carry credentials; set the access key id and the secret access key")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("package store: the endpoint %q is not an http:// or https:// URL", o.Endpoint)
	}
	return nil
}

// S3 is a Store on an S3-compatible object store, through the AWS SDK for Go v2.
type S3 struct {
	client   *s3.Client
	bucket   string
	keys     keys
	where    string // the store as messages name it
	explicit bool   // the options carry the keys
	creds    aws.CredentialsProvider
	stall    time.Duration // stallTimeout, shorter in tests
}

var _ Store = (*S3)(nil)

// New makes the store of o; it sends nothing (Check does). optFns adjust the SDK client
// further (tests count its requests).
func New(ctx context.Context, o Options, optFns ...func(*s3.Options)) (*S3, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	load := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient()),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(r *retry.StandardOptions) {
				r.MaxAttempts, r.MaxBackoff = attempts, maxBackoff
				// No client-side retry quota: a store back from an outage is used at once.
				r.RateLimiter = ratelimit.None
				// A body that is not the archive named stays so: sending it again is useless.
				r.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					if errors.Is(err, ErrCorrupt) {
						return aws.FalseTernary
					}
					return aws.UnknownTernary // the SDK's own rules decide
				})}, r.Retryables...)
			})
		}),
		// Many S3-compatible stores refuse the SDK's default CRC checksums (aws-chunked
		// bodies); the store signs each body's SHA-256 instead and verifies what it reads.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithLogger(logging.Nop{}),
	}
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	if o.AccessKeyID != "" {
		load = append(load, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("package store: loading the AWS SDK's configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	client := s3.NewFromConfig(cfg, append([]func(*s3.Options){func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
	}}, optFns...)...)
	where := o.Endpoint
	if where == "" {
		where = "AWS S3 (" + cfg.Region + ")"
	}
	return &S3{client: client, bucket: o.Bucket, keys: newKeys(o.Prefix), explicit: o.AccessKeyID != "",
		creds: cfg.Credentials, where: fmt.Sprintf("%s bucket %q", where, o.Bucket), stall: stallTimeout}, nil
}

// httpClient is the SDK's HTTP client with the store's timeouts. It stays a
// BuildableClient, which the SDK adjusts further (a custom CA bundle from AWS_CA_BUNDLE).
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = dialTimeout }).
		WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = answerTimeout })
}

// watchdog cancels a transfer that makes no progress for stallTimeout. (The HTTP client
// cannot: it awaits the response while the body is sent, for as long as that takes, and the
// SDK exempts S3 from its read timeout for that reason.)
type watchdog struct {
	timer *time.Timer
	after time.Duration
	fired atomic.Bool
}

func newWatchdog(after time.Duration, cancel context.CancelFunc) *watchdog {
	w := &watchdog{after: after}
	w.timer = time.AfterFunc(after, func() { w.fired.Store(true); cancel() })
	w.timer.Stop()
	return w
}

func (w *watchdog) start() { w.timer.Reset(w.after) }
func (w *watchdog) stop()  { w.timer.Stop() }

// explain says why a transfer the watchdog cancelled failed.
func (w *watchdog) explain(err error) error {
	if err != nil && w.fired.Load() {
		return &stalledError{after: w.after, err: err}
	}
	return err
}

// stalledError is a transfer the watchdog cancelled: the store is unavailable, where the
// cancellation alone would read as the caller's.
type stalledError struct {
	after time.Duration
	err   error
}

func (e *stalledError) Error() string { return fmt.Sprintf("no progress for %s: %v", e.after, e.err) }
func (e *stalledError) Unwrap() error { return e.err }

// upload is a PUT's body: the watchdog runs while the HTTP client sends what it read, that is
// between reads, until the body's end (then the response's wait is answerTimeout's).
type upload struct {
	*verifier
	w *watchdog
}

func (u *upload) Read(p []byte) (int, error) {
	u.w.stop()
	n, err := u.verifier.Read(p)
	if err == nil && u.pos < u.size {
		u.w.start()
	}
	return n, err
}

// seekUpload is an upload the SDK can rewind to retry.
type seekUpload struct {
	upload
	s *seekVerifier
}

func (u *seekUpload) Seek(offset int64, whence int) (int64, error) { return u.s.Seek(offset, whence) }

// Put sends the archive in one PUT whose signature covers its SHA-256 (sum itself), so the
// store refuses a body altered on the way; S3 takes at most 5 GiB in one PUT (MaxSize).
// Larger archives would need a multipart upload, whose parts are checksummed one by one and
// whose unfinished uploads need collecting; the runtime's uploads are far smaller.
func (s *S3) Put(ctx context.Context, sum [32]byte, size int64, r io.Reader) error {
	key := s.keys.of(sum)
	if size < 0 || size > MaxSize {
		return fmt.Errorf("package store: put %s: %w: %d bytes, S3 takes at most %d in one PUT", key, ErrTooLarge, size, MaxSize)
	}
	obj, err := s.stat(ctx, "put", sum)
	if err == nil && obj.Size == size && time.Since(obj.Modified) < RefreshAfter {
		return nil // written before: objects never change
	} else if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	// Absent, present with another length (a damaged object, sent again), or old enough that
	// a collector may be about to delete it: sending it again makes it new (see
	// RefreshAfter). A copy of the object onto itself would not send the bytes, but not every
	// store gives the copy a new time (versitygw's posix backend keeps it).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := newWatchdog(s.stall, cancel)
	defer w.stop()
	var body io.Reader = &upload{verifier: newVerifier(r, sum, size), w: w}
	// A stream read once cannot be sent again: no retry, so its error is the one answered.
	once := func(o *s3.Options) { o.RetryMaxAttempts = 1 }
	if rs, ok := r.(io.ReadSeeker); ok {
		// The SDK rewinds a seekable body (a file) to retry.
		v, err := newSeekVerifier(rs, sum, size)
		if err != nil {
			return fmt.Errorf("package store: put %s: %w", key, err)
		}
		body, once = &seekUpload{upload: upload{verifier: v.verifier, w: w}, s: v}, func(*s3.Options) {}
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: body, ContentLength: aws.Int64(size),
		ContentType: aws.String("application/octet-stream"),
	}, s3.WithAPIOptions(signPayload(sum)), once)
	if corrupt := (*CorruptError)(nil); errors.As(err, &corrupt) {
		return s.corrupt("put", key, corrupt)
	}
	return s.fail("put", key, w.explain(err))
}

// signPayload signs a PUT with its body's SHA-256, known before a byte is read, instead of
// the SDK's reading the body once more to compute it (plain HTTP) or leaving it unsigned
// (HTTPS): the store checks the body against it, and no body is read twice.
func signPayload(sum [32]byte) func(*middleware.Stack) error {
	hash := hex.EncodeToString(sum[:])
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("PackageStorePayloadHash",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return next.HandleFinalize(v4.SetPayloadHash(ctx, hash), in)
			}), "ComputePayloadHash", middleware.Before)
	}
}

// Open reads the object of sum; see Store.Open. A download that makes no progress for
// stallTimeout fails as ErrUnavailable.
func (s *S3) Open(ctx context.Context, sum [32]byte, size int64) (io.ReadCloser, error) {
	key := s.keys.of(sum)
	if size < 0 || size > MaxSize {
		return nil, fmt.Errorf("package store: get %s: %w: %d bytes", key, ErrTooLarge, size)
	}
	// The body is read under this context, long after GetObject returns.
	ctx, cancel := context.WithCancel(ctx)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		cancel()
		return nil, s.fail("get", key, err)
	}
	if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil && n != size {
		out.Body.Close()
		cancel()
		return nil, s.corrupt("get", key, &CorruptError{Want: sum, WantSize: size, GotSize: n})
	}
	return &download{verifier: newVerifier(out.Body, sum, size), s: s, key: key, cancel: cancel, w: newWatchdog(s.stall, cancel)}, nil
}

// download is the verified body of an object; the watchdog runs while a read waits.
type download struct {
	*verifier
	s      *S3
	key    string
	cancel context.CancelFunc
	w      *watchdog
}

func (d *download) Read(p []byte) (int, error) {
	d.w.start()
	n, err := d.verifier.Read(p)
	d.w.stop()
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, ErrCorrupt):
		return n, d.s.corrupt("get", d.key, err)
	}
	return n, d.s.fail("get", d.key, d.w.explain(err))
}

func (d *download) Close() error {
	d.w.stop()
	d.cancel()
	return d.verifier.Close()
}

// Has reports whether the object of sum is present. A missing bucket answers false, as HEAD
// cannot tell it from a missing object; Check tells.
func (s *S3) Has(ctx context.Context, sum [32]byte) (bool, error) {
	_, err := s.Stat(ctx, sum)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Stat returns the object of sum with its size and time, from a HEAD; see Store.Stat. A
// missing bucket is an ErrNotFound too, as for Has.
func (s *S3) Stat(ctx context.Context, sum [32]byte) (Object, error) {
	return s.stat(ctx, "head", sum)
}

// stat is Stat for the request op (its errors name it).
func (s *S3) stat(ctx context.Context, op string, sum [32]byte) (Object, error) {
	key := s.keys.of(sum)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return Object{}, s.fail(op, key, err)
	}
	return Object{Sum: sum, Size: aws.ToInt64(head.ContentLength), Modified: aws.ToTime(head.LastModified)}, nil
}

// Delete removes the object of sum; a missing object counts as removed. S3 answers so, but
// a server may answer NoSuchKey to the second of two deletes at once (versitygw does).
func (s *S3) Delete(ctx context.Context, sum [32]byte) error {
	key := s.keys.of(sum)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err = s.fail("delete", key, err); errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// List yields the store's objects, a page of up to 1000 at a time; other keys under the
// prefix are skipped.
func (s *S3) List(ctx context.Context) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		prefix := string(s.keys)
		pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix})
		for pages.HasMorePages() {
			pctx, cancel := context.WithTimeout(ctx, requestTimeout)
			page, err := pages.NextPage(pctx)
			cancel()
			if err != nil {
				yield(Object{}, s.fail("list", prefix, err))
				return
			}
			for _, o := range page.Contents {
				sum, ok := s.keys.sum(aws.ToString(o.Key))
				if ok && !yield(Object{Sum: sum, Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)}, nil) {
					return
				}
			}
		}
	}
}

// Check lists one object of the prefix: that needs the endpoint to answer, the credentials
// to be accepted and the bucket to exist, and the error says which failed.
func (s *S3) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if !s.explicit {
		if _, err := s.creds.Retrieve(ctx); err != nil {
			return &Error{Op: "check", Where: s.where, Kind: ErrDenied, Err: fmt.Errorf("the AWS SDK's credential chain (environment, shared files, instance role) found none: %w", err)}
		}
	}
	prefix := string(s.keys)
	_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, MaxKeys: aws.Int32(1)})
	return s.fail("check", "", err)
}

// Error is a failed request to the store. Its message names the store, the request and
// S3's error code; never a credential.
type Error struct {
	Op    string // put, get, head, delete, list, check
	Key   string // the object's key, when the request names one
	Where string // the endpoint and the bucket
	Kind  error  // ErrNotFound, ErrUnavailable, ErrDenied, ErrNoBucket, ErrCorrupt, or nil
	Err   error  // what the SDK answered
}

func (e *Error) Error() string {
	what := e.Op
	if e.Key != "" {
		what += " " + e.Key
	}
	kind := "failed"
	if e.Kind != nil {
		kind = e.Kind.Error()
	}
	return fmt.Sprintf("package store %s: %s: %s (%s)", e.Where, what, kind, describe(e.Err))
}

func (e *Error) Is(target error) bool { return target != nil && target == e.Kind }
func (e *Error) Unwrap() error        { return e.Err }

// corrupt is the error of a request whose archive is not the one its key names.
func (s *S3) corrupt(op, key string, err error) error {
	return fmt.Errorf("package store %s: %s %s: %w", s.where, op, key, err)
}

// fail classifies the SDK's error of a request; nil stays nil.
func (s *S3) fail(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Key: key, Where: s.where, Kind: classify(err), Err: err}
}

// denied are S3's error codes for credentials it does not accept, or their permissions
// (versitygw answers an unknown access key with XAdminUserNotFound, HTTP 404).
var denied = []string{"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
	"ExpiredToken", "InvalidSecurity", "TokenRefreshRequired", "AllAccessDisabled", "Forbidden",
	"XAdminUserNotFound"}

// unavailable are S3's error codes (besides 5xx answers) for a request that may work later.
var unavailable = []string{"SlowDown", "RequestTimeout", "ServiceUnavailable", "InternalError", "Throttling"}

// classify says which class of error err is: S3's code when it answered one, else its HTTP
// status; no answer at all (network, timeout) is ErrUnavailable. The caller's cancellation is
// of no class.
func classify(err error) error {
	if stalled := (*stalledError)(nil); errors.As(err, &stalled) {
		return ErrUnavailable
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	status := 0
	if re := (*awshttp.ResponseError)(nil); errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	if api := smithy.APIError(nil); errors.As(err, &api) {
		code = api.ErrorCode()
	}
	switch {
	case code == "NoSuchKey" || code == "NotFound" && status == http.StatusNotFound:
		return ErrNotFound
	case code == "XAmzContentSHA256Mismatch" || code == "BadDigest":
		return ErrCorrupt // the body the store received is not the one signed
	case code == "NoSuchBucket":
		return ErrNoBucket
	case slices.Contains(denied, code) || status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ErrDenied
	case slices.Contains(unavailable, code) || status >= 500 || status == http.StatusTooManyRequests:
		return ErrUnavailable
	case status == 0:
		return ErrUnavailable
	}
	return nil
}

// describe is the short account of the SDK's error: S3's code, message and HTTP status, or
// the network's error; the SDK's long chain of wrappers stays behind Unwrap.
func describe(err error) string {
	if api := smithy.APIError(nil); errors.As(err, &api) {
		s := api.ErrorCode()
		if m := api.ErrorMessage(); m != "" && m != s {
			s += ": " + m
		}
		if re := (*awshttp.ResponseError)(nil); errors.As(err, &re) {
			s += ", HTTP " + strconv.Itoa(re.HTTPStatusCode())
		}
		return s
	}
	if op := (*net.OpError)(nil); errors.As(err, &op) {
		return "unreachable: " + op.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time: " + err.Error()
	}
	return err.Error()
}
