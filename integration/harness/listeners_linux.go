package harness

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// listeners counts the sockets of this network namespace listening on TCP port, from
// /proc/net/tcp and tcp6.
func listeners(port int) (int, error) {
	local := fmt.Sprintf(":%04X", port)
	n := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st …; st 0A is LISTEN.
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && strings.HasSuffix(fields[1], local) && fields[3] == "0A" {
				n++
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
