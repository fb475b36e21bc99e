package api

// WorkerCron is a worker's cron triggers: what GET cron, and pause and resume, answer.
type WorkerCron struct {
	Name     string        `json:"name"`
	Version  string        `json:"version,omitempty" doc:"the version whose manifest declares the triggers: the worker's active version here; absent while none is enabled"`
	Paused   bool          `json:"paused" doc:"the worker's triggers are paused: no tick runs until they are resumed"`
	PausedAt string        `json:"pausedAt,omitempty" format:"date-time"`
	PausedBy string        `json:"pausedBy,omitempty" doc:"the key prefix of the key that paused them"`
	Triggers []CronTrigger `json:"triggers" doc:"the manifest's cron entries, in its order"`
	Runs     []CronRun     `json:"runs" doc:"the last runs of the worker's triggers (at most 100 kept), newest first, as every instance sees them"`
}

// CronTrigger is one entry of a worker's cron manifest key.
type CronTrigger struct {
	Name     string `json:"name" doc:"the entry's name, else its index in the list: the value of the Runtime-Cron header of its requests"`
	Schedule string `json:"schedule" doc:"five cron fields, a descriptor such as @hourly, or @every with a duration"`
	Timezone string `json:"timezone" doc:"the zone the schedule is read in"`
	Method   string `json:"method"`
	Path     string `json:"path" doc:"the path on the worker each tick requests"`
	Timeout  string `json:"timeout" doc:"how long a run may take, a Go duration"`
	NextRun  string `json:"nextRun,omitempty" format:"date-time" doc:"the next tick; absent when the schedule has none left"`
}

// CronRun is one tick of a trigger.
type CronRun struct {
	Trigger     string `json:"trigger"`
	ScheduledAt string `json:"scheduledAt" format:"date-time" doc:"the tick, to the millisecond"`
	StartedAt   string `json:"startedAt" format:"date-time" doc:"when the tick fired, to the millisecond"`
	Instance    string `json:"instance" doc:"the id of the instance that ran it"`
	Status      string `json:"status" enum:"running,ok,failed,timeout,skipped" doc:"ok: the worker answered 2xx or 3xx; failed: another status, or no answer; timeout: none within the trigger's timeout; skipped: the trigger's previous run had not ended; running: not ended (or its instance stopped first)"`
	HTTPStatus  int    `json:"httpStatus,omitempty" doc:"the status of the worker's answer"`
	DurationMs  int64  `json:"durationMs" doc:"how long the request took, in milliseconds"`
	Error       string `json:"error,omitempty"`
	RequestID   string `json:"requestId,omitempty" doc:"the request's X-Request-Id, on the runtime's and the worker's log lines"`
}
