package workers

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezone names are checked alike on every machine, with or without a zoneinfo folder

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/caddy-runtime/runtime/packages"
)

// Bounds of a worker's cron triggers.
const (
	// MaxCronTriggers is how many entries cron may have: each is a request on its schedule.
	MaxCronTriggers = 16
	// DefaultCronMethod is a trigger's method when it names none.
	DefaultCronMethod = http.MethodPost
)

// cronParser reads a trigger's schedule: five fields (minute hour day-of-month month
// day-of-week), the descriptors (@yearly, @monthly, @weekly, @daily, @hourly) and @every
// with a Go duration. robfig/cron's own, so the syntax is the one its users know.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cronName is what a trigger's name may be.
var cronName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// CronTrigger is one entry of a worker's cron manifest key: at each tick of Schedule the
// runtime sends Method Path to the worker's active version.
type CronTrigger struct {
	// Name names the trigger in the Runtime-Cron header and the API; "" names it by its
	// index in the list ("0", "1", …).
	Name     string   `yaml:"name"`
	Schedule string   `yaml:"schedule"`
	Path     string   `yaml:"path"`
	Method   string   `yaml:"method"`
	Timeout  Duration `yaml:"timeout"`
	Timezone string   `yaml:"timezone"`

	schedule cron.Schedule
	location *time.Location
}

// Next is the first tick of the trigger after after, in its timezone (UTC unless it names
// one); the zero time when the schedule has none (a date that never comes).
func (t CronTrigger) Next(after time.Time) time.Time {
	if t.schedule == nil {
		return time.Time{}
	}
	return t.schedule.Next(after.In(t.location))
}

// UnmarshalYAML reads a trigger's mapping, refusing other shapes with an example.
func (t *CronTrigger) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("each cron entry must be a mapping such as { schedule: \"*/5 * * * *\", path: /tasks/cleanup }")
	}
	type plain CronTrigger
	return n.Decode((*plain)(t))
}

// checkCron validates the manifest's cron entries of a version of kind k, parses their
// schedules and fills in their defaults: the method POST, the timeout the worker's, the names
// of unnamed entries their index. Each error names the entry.
func (m *Manifest) checkCron(k Kind) error {
	if len(m.Cron) == 0 {
		return nil
	}
	if k == Files || k == SPA {
		return fmt.Errorf("cron: only workers that run code (process or WebAssembly) have cron triggers; this version serves files: remove cron")
	}
	if len(m.Cron) > MaxCronTriggers {
		return fmt.Errorf("cron has %d entries; a worker may have at most %d (one entry can run several paths' work)", len(m.Cron), MaxCronTriggers)
	}
	var names []string
	for i := range m.Cron {
		t := &m.Cron[i]
		entry := "cron[" + strconv.Itoa(i) + "]"
		if t.Name != "" {
			if !cronName.MatchString(t.Name) {
				return fmt.Errorf("%s: name %q must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", entry, t.Name)
			}
			entry += " (" + t.Name + ")"
		} else {
			t.Name = strconv.Itoa(i)
		}
		if slices.Contains(names, t.Name) {
			return fmt.Errorf("%s: the name %q is taken by another entry; give each entry its own name", entry, t.Name)
		}
		names = append(names, t.Name)
		if err := t.check(entry, time.Duration(m.Timeout)); err != nil {
			return err
		}
	}
	return nil
}

// check validates one trigger, entry naming it in errors.
func (t *CronTrigger) check(entry string, workerTimeout time.Duration) error {
	spec := strings.TrimSpace(t.Schedule)
	switch {
	case spec == "":
		return fmt.Errorf("%s: schedule is missing: write five cron fields such as \"*/5 * * * *\", or @hourly, @daily or @every 30s", entry)
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return fmt.Errorf("%s: schedule %q: name the zone in the entry's timezone key, not in the schedule", entry, t.Schedule)
	}
	schedule, err := cronParser.Parse(spec)
	if err != nil {
		return fmt.Errorf("%s: schedule %q is not valid (%v): write five cron fields (minute hour day-of-month month day-of-week) "+
			"such as \"*/5 * * * *\", or @hourly, @daily, @weekly, @monthly, @yearly or @every 30s", entry, t.Schedule, err)
	}
	// robfig/cron rounds a shorter @every up to a second; say so rather than run another schedule.
	if every, ok := strings.CutPrefix(spec, "@every "); ok && parsedDelay(every) < time.Second {
		return fmt.Errorf("%s: schedule %q: @every takes at least 1s", entry, t.Schedule)
	}
	t.schedule = schedule
	if t.Path == "" {
		return fmt.Errorf("%s: path is missing: name the path on the worker the tick requests, e.g. /tasks/cleanup", entry)
	}
	if err := checkWorkerPath(entry+": path", t.Path, "/tasks/cleanup"); err != nil {
		return err
	}
	switch t.Method = strings.ToUpper(t.Method); t.Method {
	case "":
		t.Method = DefaultCronMethod
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return fmt.Errorf("%s: method %q: use GET, POST (the default), PUT, PATCH or DELETE", entry, t.Method)
	}
	if t.Timeout == 0 {
		t.Timeout = Duration(workerTimeout)
	}
	t.location = time.UTC
	if t.Timezone != "" {
		if t.location, err = time.LoadLocation(t.Timezone); err != nil || t.Timezone == "Local" {
			return fmt.Errorf("%s: timezone %q is not a zone name such as Europe/Paris or UTC", entry, t.Timezone)
		}
	}
	return nil
}

// parsedDelay is the duration of an @every schedule as written, 0 when it is not one.
func parsedDelay(s string) time.Duration {
	d, _ := time.ParseDuration(strings.TrimSpace(s))
	return d
}

// CronOf returns the cron triggers of the version of u that unpinned requests reach when no
// split is in force (ActiveVersion, given its activation a here), and that version; none
// while no version is enabled or the version's manifest does not read.
func CronOf(u packages.Unit, a Activation) ([]CronTrigger, string) {
	v, ok := ActiveVersion(u, a)
	if !ok {
		return nil, ""
	}
	m, err := ReadManifest(v.Metadata)
	if err != nil {
		return nil, v.Version
	}
	return m.Cron, v.Version
}
