package testkit

import (
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
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	d.Addr = pc.LocalAddr().String()
	ln, err := net.Listen("tcp", d.Addr)
	if err != nil {
		pc.Close()
		tb.Fatal(err)
	}
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
