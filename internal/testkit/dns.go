package testkit

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// DNS is a DNS server on loopback (UDP and TCP on one port) that answers the TXT records a
// test sets and NXDOMAIN for every other name; it stops when the test ends.
type DNS struct {
	Addr string // host:port

	mu  sync.Mutex
	txt map[string][]string // fully qualified, lower case
}

// StartDNS starts a DNS server for tb.
func StartDNS(tb testing.TB) *DNS {
	tb.Helper()
	d := &DNS{txt: map[string][]string{}}
	pc, ln, err := listenUDPAndTCP()
	if err != nil {
		tb.Fatal(err)
	}
	d.Addr = pc.LocalAddr().String()
	udp := &dns.Server{PacketConn: pc, Handler: d}
	tcp := &dns.Server{Listener: ln, Handler: d}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	tb.Cleanup(func() {
		udp.Shutdown()
		tcp.Shutdown()
	})
	return d
}

// SetTXT makes name answer the TXT records values; none removes it.
func (d *DNS) SetTXT(name string, values ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.txt[dns.Fqdn(strings.ToLower(name))] = values
}

// ServeDNS answers a query.
func (d *DNS) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, question := range q.Question {
		values, ok := d.txt[strings.ToLower(question.Name)]
		if !ok || len(values) == 0 {
			m.Rcode = dns.RcodeNameError
			continue
		}
		if question.Qtype != dns.TypeTXT {
			continue // the name exists, without records of that type
		}
		for _, v := range values {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 0}, Txt: []string{v}})
		}
	}
	w.WriteMsg(m)
}

// listenUDPAndTCP listens on one port of 127.0.0.1 for both UDP and TCP, as a DNS server does.
// The kernel picks a free UDP port, whose TCP twin may be taken (a client's ephemeral port comes
// from the same range): another port is tried then.
func listenUDPAndTCP() (net.PacketConn, net.Listener, error) {
	var err error
	for range 20 {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, nil, err
		}
		ln, lerr := net.Listen("tcp", pc.LocalAddr().String())
		if lerr == nil {
			return pc, ln, nil
		}
		pc.Close()
		err = lerr
	}
	return nil, nil, fmt.Errorf("no port free for both UDP and TCP on 127.0.0.1 in 20 tries: %w", err)
}
