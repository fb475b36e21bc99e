// Package troubleshooting names the paragraphs of the troubleshooting guide,
// docs/troubleshooting.md, that explain the runtime's start-up warnings: each warning's log
// line carries the link to its paragraph in a "docs" field, so the person reading the log
// finds what it means and what to do.
package troubleshooting

import "go.uber.org/zap"

// Page is the troubleshooting guide's address.
const Page = "https://github.com/caddy-runtime/runtime/blob/main/docs/troubleshooting.md"

// Anchor is the anchor of a paragraph of the guide: the GitHub slug of its heading.
type Anchor string

// The guide's paragraphs, one per warning.
const (
	BootstrapKeyCreated    Anchor = "bootstrap-key-created"
	BootstrapKeyDeleted    Anchor = "bootstrap-key-file-deleted"
	NoBootstrapKey         Anchor = "no-bootstrap-key-primary-unreachable"
	StatePermissions       Anchor = "state-permissions-tightened"
	DeprecatedSiteSettings Anchor = "settings-in-a-site-block-deprecated"
	ShortRootKey           Anchor = "short-root-key"
	RootKeyInConfig        Anchor = "root-key-written-in-the-config"
	S3SecretInConfig       Anchor = "s3-secret-written-in-the-config"
	SecretsKeyInConfig     Anchor = "secrets-key-written-in-the-config"
	SharedOrigin           Anchor = "workers-on-the-same-origin-as-the-api"
	SameSite               Anchor = "workers-on-the-same-registrable-domain"
	AccessLog              Anchor = "access-log-records-api-keys"
	AdminOnTCP             Anchor = "admin-endpoint-on-tcp"
	NoSeccomp              Anchor = "no-seccomp-filter"
	WorkersAsRoot          Anchor = "process-workers-run-as-root"
	NoLandlock             Anchor = "no-landlock"
	NoTmpfs                Anchor = "no-tmpfs-for-scratch-folders"
	NoCgroup               Anchor = "no-cgroup-for-worker-limits"
	PrivateFolderReadable  Anchor = "private-folder-readable-by-workers"
	Unconfined             Anchor = "process-workers-unconfined"
	PrimaryUnreachable     Anchor = "key-store-primary-unreachable"
	PluginNotLoaded        Anchor = "plugin-not-loaded"
	ScratchLeftover        Anchor = "scratch-folder-left-by-an-earlier-runtime"
	CheckFailed            Anchor = "worker-version-failed-its-check"
	CrashLooping           Anchor = "worker-crash-looping"
	PortTaken              Anchor = "worker-port-taken-by-another-process"
	DescriptorLimit        Anchor = "runtime-descriptor-limit-low-for-workers"
)

// All lists every anchor, in the guide's order.
var All = []Anchor{
	BootstrapKeyCreated, BootstrapKeyDeleted, NoBootstrapKey, StatePermissions, DeprecatedSiteSettings,
	ShortRootKey, RootKeyInConfig, S3SecretInConfig, SecretsKeyInConfig, SharedOrigin, SameSite, AccessLog, AdminOnTCP,
	NoSeccomp, WorkersAsRoot, NoLandlock, NoTmpfs, NoCgroup, PrivateFolderReadable, Unconfined,
	PrimaryUnreachable, PluginNotLoaded, ScratchLeftover, CheckFailed, CrashLooping, PortTaken, DescriptorLimit,
}

// URL is the link to the paragraph.
func (a Anchor) URL() string { return Page + "#" + string(a) }

// Field is the "docs" field of a warning's log line: the link to its paragraph.
func (a Anchor) Field() zap.Field { return zap.String("docs", a.URL()) }
