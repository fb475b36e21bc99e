package sandbox

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel's socket diagnostics (sock_diag, the interface ss uses) list the TCP sockets
// listening on one port without walking every connection of the host, as reading
// /proc/net/tcp does: cheap enough to ask on every new connection to a worker.

// Sizes and offsets of struct inet_diag_req_v2 and struct inet_diag_msg (linux/inet_diag.h),
// and the attribute that follows the message with the socket's cgroup (Linux 5.7 on).
const (
	diagReqSize    = 56
	diagMsgUID     = 64 // family, state, timer, retrans, inet_diag_sockid (48), expires, rqueue, wqueue
	diagMsgInode   = 68
	diagMsgMinLen  = 72
	diagAttrCgroup = 21 // INET_DIAG_CGROUP_ID, a u64
)

// listener is a socket listening on a port.
type listener struct {
	inode uint64
	uid   uint32
	// cgroup is the id of the v2 cgroup of the process that made the socket (a socket is
	// charged to its maker's cgroup for its life), 0 where the kernel does not tell.
	cgroup uint64
}

// diagListeners returns the sockets of family listening on TCP port.
func diagListeners(family uint8, port int) ([]listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+diagReqSize)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1) // sequence
	body := req[unix.NLMSG_HDRLEN:]
	body[0], body[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(body[4:], 1<<unix.BPF_TCP_LISTEN) // states: LISTEN only
	binary.BigEndian.PutUint16(body[8:], uint16(port))              // id.sport: the kernel skips other listeners
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	var found []listener
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return found, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						return nil, fmt.Errorf("sock_diag: %w", syscall.Errno(errno))
					}
				}
				return found, nil
			}
			if len(m.Data) < diagMsgMinLen || binary.BigEndian.Uint16(m.Data[4:]) != uint16(port) {
				continue
			}
			if inode := binary.NativeEndian.Uint32(m.Data[diagMsgInode:]); inode != 0 {
				found = append(found, listener{inode: uint64(inode), uid: binary.NativeEndian.Uint32(m.Data[diagMsgUID:]),
					cgroup: diagCgroup(m.Data[diagMsgMinLen:])})
			}
		}
	}
}

// diagCgroup returns the cgroup id among the attributes (struct nlattr, each 4-byte aligned)
// that follow an inet_diag_msg, 0 without one.
func diagCgroup(attrs []byte) uint64 {
	for len(attrs) >= unix.SizeofNlAttr {
		n := int(binary.NativeEndian.Uint16(attrs))
		if n < unix.SizeofNlAttr || n > len(attrs) {
			return 0
		}
		if binary.NativeEndian.Uint16(attrs[2:]) == diagAttrCgroup && n >= unix.SizeofNlAttr+8 {
			return binary.NativeEndian.Uint64(attrs[unix.SizeofNlAttr:])
		}
		attrs = attrs[min(len(attrs), (n+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1)):]
	}
	return 0
}
