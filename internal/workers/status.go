package workers

import (
	"slices"
	"strings"
	"time"
)

// ProcState is where a process is in its life.
type ProcState string

// The states of a process.
const (
	Starting ProcState = "starting" // launched, not yet accepting connections
	Running  ProcState = "running"  // taking requests
	Draining ProcState = "draining" // out of the pool: finishing its requests, then stopping
)

// ProcStatus describes one worker process.
type ProcStatus struct {
	Name, Version string
	PID           int
	State         ProcState
	StartedAt     time.Time // zero while starting
	Requests      int       // requests served
	InFlight      int       // requests being served now
	LastRequest   time.Time
	// Restarts counts the restarts of the version's process: after a crash, or asked for.
	Restarts int
	// RSS is the resident memory in bytes, or -1 where the platform does not tell.
	RSS int64
	// Crashes and RetryAt describe a CrashLooping version: its crashes in a row, and when a
	// request may start it again.
	Crashes int
	RetryAt time.Time
}

// Status lists the live processes, starting and draining ones included, and the crash-looping
// versions without one, by name and version.
func (p *Pool) Status() []ProcStatus {
	p.mu.Lock()
	out := make([]ProcStatus, 0, len(p.live))
	for pr := range p.live {
		st := ProcStatus{Name: pr.name, Version: pr.version, State: pr.state(), StartedAt: pr.started,
			Requests: int(pr.served.Load()), InFlight: int(pr.inflight.Load()), LastRequest: time.Unix(0, pr.lastUsed.Load()),
			Restarts: p.restarts[pr.key], RSS: -1}
		if !pr.started.IsZero() { // cmd is set before started, under mu
			st.PID = pr.cmd.Pid()
		}
		out = append(out, st)
	}
	out = append(out, p.crashLoopingLocked()...)
	p.mu.Unlock()
	for i := range out {
		if out[i].PID > 0 {
			out[i].RSS = rss(out[i].PID)
		}
	}
	slices.SortFunc(out, func(a, b ProcStatus) int {
		return strings.Compare(a.Name+"\x00"+a.Version, b.Name+"\x00"+b.Version)
	})
	return out
}

// Counts returns the number of live processes by state, and of crash-looping versions without
// one, as Status would list them.
func (p *Pool) Counts() map[ProcState]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[ProcState]int{}
	for pr := range p.live {
		out[pr.state()]++
	}
	if n := len(p.crashLoopingLocked()); n > 0 {
		out[CrashLooping] = n
	}
	return out
}

// state is where the process is in its life; the pool's lock is held.
func (pr *proc) state() ProcState {
	switch {
	// A fresh process (ttl: 0) is out of the table from its start: it drains once its one
	// request is done.
	case pr.retiring.Load() && !(pr.m.TTL.Fresh && pr.inflight.Load() > 0 && !pr.stopping.Load()):
		return Draining
	case pr.started.IsZero():
		return Starting
	}
	return Running
}

// Restart drains the running processes of a worker (of one version, when version is set) and
// starts a new process for each at once: requests in flight finish on the old process, the
// next ones go to the new. It returns the versions restarted.
func (p *Pool) Restart(name, version string) []string {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	var drained []*proc
	for _, pr := range *p.running.Load() { // the table as it was: the loop adds to it
		if pr.name != name || version != "" && pr.version != version {
			continue
		}
		p.retireLocked(pr)
		p.restarts[pr.key]++
		p.opts.Events.ProcessRestarted(pr.name)
		next := p.newProc(pr.name, pr.version, pr.dir, pr.m)
		next.lastUsed.Store(time.Now().UnixNano())
		p.putLocked(next)
		p.stopped.Add(1)
		p.live[next] = struct{}{}
		go next.start()
		drained = append(drained, pr)
	}
	p.mu.Unlock()
	restarted := make([]string, 0, len(drained))
	for _, pr := range drained {
		pr.logger.Info("worker restart asked for; draining its process")
		restarted = append(restarted, pr.version)
	}
	slices.Sort(restarted)
	return restarted
}

// VersionStates gives, by name@version, the state of each version the pool knows now: its
// process taking requests (or starting), or CrashLooping while its crashes in a row have not
// been forgotten, even while a request starts it once more. It reads no process memory, so a
// listing may ask it on every request.
func (p *Pool) VersionStates() map[string]ProcState {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]ProcState, len(p.procs))
	for _, pr := range p.procs {
		out[pr.name+"@"+pr.version] = pr.state()
	}
	for _, b := range p.crashes {
		if b.looping {
			out[b.name+"@"+b.version] = CrashLooping
		}
	}
	return out
}
