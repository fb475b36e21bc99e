package testkit

// SeccompAttempt is how the test worker tries one refusal of the sandbox's seccomp layer.
type SeccompAttempt struct {
	Calls []string // keys of the test worker's syscall report (TESTWORKER_MODE=syscalls, /syscalls)
	Errno string   // what the filter answers each of them
}

// SeccompAttempts maps each refusal the seccomp layer names in the start-up log to the test
// worker's calls that try it.
var SeccompAttempts = map[string]SeccompAttempt{
	"io_uring_*":                        {[]string{"io_uring_setup", "io_uring_enter", "io_uring_register"}, "ENOSYS"},
	"socket AF_UNIX/AF_VSOCK/AF_PACKET": {[]string{"socket AF_UNIX", "socket AF_UNIX with the upper half set", "socket AF_VSOCK", "socket AF_PACKET"}, "EACCES"},
	"unshare":                           {[]string{"unshare"}, "EPERM"},
	"setns":                             {[]string{"setns"}, "EPERM"},
	"clone with namespace flags":        {[]string{"clone with namespace flags"}, "EPERM"},
	"clone3":                            {[]string{"clone3"}, "ENOSYS"},
	"ptrace":                            {[]string{"ptrace"}, "EPERM"},
	"process_vm_readv/writev":           {[]string{"process_vm_readv", "process_vm_writev"}, "EPERM"},
	"pidfd_getfd":                       {[]string{"pidfd_getfd"}, "EPERM"},
	"bpf":                               {[]string{"bpf"}, "EPERM"},
	"perf_event_open":                   {[]string{"perf_event_open"}, "EPERM"},
	"keyctl":                            {[]string{"keyctl"}, "EPERM"},
	"add_key":                           {[]string{"add_key"}, "EPERM"},
	"request_key":                       {[]string{"request_key"}, "EPERM"},
	"userfaultfd":                       {[]string{"userfaultfd"}, "EPERM"},
	"module loading":                    {[]string{"init_module", "finit_module", "delete_module"}, "EPERM"},
	"kexec":                             {[]string{"kexec_load", "kexec_file_load"}, "EPERM"},
	"setsockopt SO_REUSEPORT":           {[]string{"setsockopt SO_REUSEPORT"}, "EPERM"},
}

// SeccompAllowed are the test worker's calls the filter lets through: workers need them.
var SeccompAllowed = []string{"socketpair AF_UNIX", "socket AF_NETLINK", "socket AF_INET", "clone without namespace flags", "setsockopt SO_REUSEADDR"}
