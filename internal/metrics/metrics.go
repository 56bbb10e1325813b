// Package metrics is Gatehouse's Prometheus instrumentation, served at
// /metrics from a registry of its own (no global state).
//
// The engine stays free of Prometheus: task and node metrics are derived
// from the committed events the engine and the store publish to an
// EventSink (Metrics implements graph.EventSink); LLM calls are measured
// by wrapping the llm.Provider, checkpoint writes by wrapping the
// graph.Checkpointer; pending interrupts are counted in the database at
// each scrape; open websockets are read from the web server at each scrape.
//
// Counters and histograms count what this process did (its commits, its
// calls), so sums across replicas are right; pending_interrupts is the
// database's count, the same on every replica (use max, not sum).
//
// It imports graph and llm for what it counts; never postgres nor
// internal/web.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatehousehq/gatehouse/graph"
)

// Metric names.
const (
	NameWorkflowRuns       = "workflow_runs_total"
	NameWorkflowDuration   = "workflow_duration_seconds"
	NameWorkflowTurns      = "workflow_turns"
	NameNodeRunDuration    = "node_run_duration_seconds"
	NameLLMCallDuration    = "llm_call_duration_seconds"
	NameLLMCallErrors      = "llm_call_errors_total"
	NamePendingInterrupts  = "pending_interrupts"
	NameInterruptDecision  = "interrupt_decision_seconds"
	NameDecisionSeconds    = "gatehouse_decision_seconds"
	NameInterruptsPending  = "gatehouse_interrupts_pending"
	NameOldestPending      = "gatehouse_interrupt_oldest_pending_seconds"
	NameCheckpointWrite    = "checkpoint_write_seconds"
	NameWebsocketsOpen     = "websockets_open"
	NameEventsDropped      = "gatehouse_metrics_events_dropped_total"
	NameMetricsLookupError = "gatehouse_metrics_lookup_errors_total"
)

// Reader is what the metrics read of storage: the task of a completed run
// (workflow, times, result) and the interrupt a decision answers (when it
// was raised). *postgres.Store implements it.
type Reader interface {
	Task(ctx context.Context, taskID string) (*graph.Task, error)
	Interrupt(ctx context.Context, id string) (*graph.Interrupt, error)
}

// Config configures Metrics.
type Config struct {
	// Reader looks up tasks and interrupts named by events. Nil: the
	// workflow_* and interrupt_decision_seconds series stay empty.
	Reader Reader
	// PendingInterrupts counts the pending interrupts by kind; called at
	// each scrape. Nil: no pending_interrupts series.
	PendingInterrupts func(ctx context.Context) (map[string]int, error)
	// PendingStats reads the pending interrupts by kind with the age of
	// the oldest; called at each scrape. Nil: no gatehouse_interrupts_pending
	// and gatehouse_interrupt_oldest_pending_seconds series.
	PendingStats func(ctx context.Context) (map[string]PendingStat, error)
	// InterruptKinds are reported (0 when none is pending) from the
	// start; kinds seen later are added.
	InterruptKinds []string
	// Logger; nil discards.
	Logger *slog.Logger
}

// Metrics holds the collectors and the goroutine that turns events into
// observations. Build it with New, start it with Run.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger
	rd  Reader

	runs             *prometheus.CounterVec
	workflowDuration *prometheus.HistogramVec
	turns            *prometheus.HistogramVec
	nodeRun          *prometheus.HistogramVec
	llmDuration      *prometheus.HistogramVec
	llmErrors        *prometheus.CounterVec
	decision         *prometheus.HistogramVec
	decisionAction   *prometheus.HistogramVec
	cpWrite          prometheus.Histogram
	pending          *pendingCollector
	backlog          *backlogCollector
	dropped          prometheus.Counter
	lookupErrors     prometheus.Counter

	queue chan batch

	mu        sync.Mutex
	workflows map[string]string // task id → workflow, for node runs
}

// batch is the part of published events the metrics need, or a flush
// marker.
type batch struct {
	evs   []event
	flush chan struct{}
}

type event struct {
	typ, task, node string
	at              time.Time
	dur             time.Duration
	hasDur          bool
	interruptID     string
	kind            string
	action          string
}

// queueSize is how many published batches may wait; beyond it they are
// dropped (and counted) rather than slow the engine down.
const queueSize = 4096

// maxRemembered bounds the task → workflow cache.
const maxRemembered = 50_000

// New builds the metrics on a fresh registry, with the Go runtime and
// process collectors.
func New(cfg Config) *Metrics {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: log, rd: cfg.Reader, queue: make(chan batch, queueSize),
		workflows: map[string]string{}}
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameWorkflowRuns,
		Help: "Task runs that ended, by workflow and completion reason (succeeded, failed, cancelled, or the workflow's own completion_reason)."},
		[]string{"workflow", "reason"})
	m.workflowDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameWorkflowDuration,
		Help:    "Time from a task's creation to its end, human waits included.",
		Buckets: []float64{0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600}},
		[]string{"workflow"})
	m.turns = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameWorkflowTurns,
		Help:    "Turns a task took, for workflows that report them (result turn_count or turns).",
		Buckets: []float64{1, 2, 3, 4, 5, 7, 10, 15, 20}},
		[]string{"workflow"})
	m.nodeRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameNodeRunDuration,
		Help:    "Duration of completed node runs, by workflow and node.",
		Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600}},
		[]string{"workflow", "node"})
	m.llmDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameLLMCallDuration,
		Help:    "Duration of LLM calls (retries included), by provider and role.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320}},
		[]string{"provider", "role"})
	m.llmErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameLLMCallErrors,
		Help: "LLM calls that failed (after the provider's retries), by provider and role."},
		[]string{"provider", "role"})
	m.decision = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameInterruptDecision,
		Help:    "Time from an interrupt being raised to the decision on it, by interrupt kind.",
		Buckets: []float64{1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600}},
		[]string{"kind"})
	m.decisionAction = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: NameDecisionSeconds,
		Help:    "Time from an interrupt being raised to the decision on it, by interrupt kind and action (decisions this replica recorded).",
		Buckets: []float64{1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 8 * 3600, 24 * 3600, 3 * 24 * 3600, 7 * 24 * 3600}},
		[]string{"kind", "action"})
	m.cpWrite = prometheus.NewHistogram(prometheus.HistogramOpts{Name: NameCheckpointWrite,
		Help:    "Duration of checkpoint commits (one per node run, interrupt or decision applied).",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: NameEventsDropped,
		Help: "Published events the metrics dropped because their queue was full."})
	m.lookupErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: NameMetricsLookupError,
		Help: "Tasks or interrupts the metrics could not look up (their observation was skipped)."})
	m.reg.MustRegister(m.runs, m.workflowDuration, m.turns, m.nodeRun, m.llmDuration, m.llmErrors, m.decision,
		m.decisionAction, m.cpWrite, m.dropped, m.lookupErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.PendingInterrupts != nil {
		m.pending = newPendingCollector(cfg.PendingInterrupts, cfg.InterruptKinds, log)
		m.reg.MustRegister(m.pending)
	}
	if cfg.PendingStats != nil {
		m.backlog = newBacklogCollector(cfg.PendingStats, cfg.InterruptKinds, log)
		m.reg.MustRegister(m.backlog)
	}
	return m
}

// Registry is the registry the metrics live on (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn)})
}

// AddInterruptKinds makes pending_interrupts report these kinds (0 when
// none is pending) from now on, not only once one has been seen.
func (m *Metrics) AddInterruptKinds(kinds ...string) {
	if m.pending != nil {
		m.pending.mu.Lock()
		for _, k := range kinds {
			m.pending.kinds[k] = true
		}
		m.pending.mu.Unlock()
	}
	if m.backlog != nil {
		m.backlog.mu.Lock()
		for _, k := range kinds {
			m.backlog.kinds[k] = true
		}
		m.backlog.mu.Unlock()
	}
}

// WatchWebsockets reports open() as the websockets_open gauge at each
// scrape. Call it at most once.
func (m *Metrics) WatchWebsockets(open func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameWebsocketsOpen,
		Help: "Websockets open on this replica (event streams and live pages)."},
		func() float64 { return float64(open()) }))
}

// pendingCollector counts pending interrupts in the database at each scrape.
type pendingCollector struct {
	count func(ctx context.Context) (map[string]int, error)
	desc  *prometheus.Desc
	log   *slog.Logger

	mu    sync.Mutex
	kinds map[string]bool
}

func newPendingCollector(count func(context.Context) (map[string]int, error), kinds []string, log *slog.Logger) *pendingCollector {
	c := &pendingCollector{count: count, log: log, kinds: map[string]bool{},
		desc: prometheus.NewDesc(NamePendingInterrupts, "Interrupts waiting for a human, by kind (counted in the database).",
			[]string{"kind"}, nil)}
	for _, k := range kinds {
		c.kinds[k] = true
	}
	return c
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		c.log.Warn("counting pending interrupts for /metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range counts {
		c.kinds[k] = true
	}
	for k := range c.kinds {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[k]), k)
	}
}

// PendingStat is the backlog of one interrupt kind.
type PendingStat struct {
	Pending int
	// OldestSeconds is the age of the oldest pending interrupt, by the
	// database's clock.
	OldestSeconds float64
}

// backlogCollector reads the pending interrupts and the age of the oldest
// per kind in the database at each scrape (SPEC §13): every replica
// reports the same values (use max, not sum, across replicas).
type backlogCollector struct {
	read           func(ctx context.Context) (map[string]PendingStat, error)
	pending, older *prometheus.Desc
	log            *slog.Logger

	mu    sync.Mutex
	kinds map[string]bool
}

func newBacklogCollector(read func(context.Context) (map[string]PendingStat, error), kinds []string, log *slog.Logger) *backlogCollector {
	c := &backlogCollector{read: read, log: log, kinds: map[string]bool{},
		pending: prometheus.NewDesc(NameInterruptsPending, "Interrupts waiting for a human, by kind (read from the database).",
			[]string{"kind"}, nil),
		older: prometheus.NewDesc(NameOldestPending, "Age of the oldest pending interrupt, by kind; 0 when none waits (read from the database).",
			[]string{"kind"}, nil)}
	for _, k := range kinds {
		c.kinds[k] = true
	}
	return c
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.pending; ch <- c.older }

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	stats, err := c.read(ctx)
	if err != nil {
		c.log.Warn("reading pending interrupts for /metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(c.pending, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range stats {
		c.kinds[k] = true
	}
	for k := range c.kinds {
		st := stats[k]
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Pending), k)
		ch <- prometheus.MustNewConstMetric(c.older, prometheus.GaugeValue, st.OldestSeconds, k)
	}
}
