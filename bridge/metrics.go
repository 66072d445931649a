package bridge

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bridge's Prometheus collectors. A nil *Metrics records nothing,
// so tests and tools need not build one.
type Metrics struct {
	events      *prometheus.CounterVec
	apiCalls    *prometheus.CounterVec
	apiLatency  *prometheus.HistogramVec
	flowRuns    *prometheus.CounterVec
	queueDepth  prometheus.Gauge
	inFlight    prometheus.Gauge
	dedup       *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	storeErrs   *prometheus.CounterVec
	recovered   *prometheus.CounterVec
	undelivered *prometheus.CounterVec
	votes       *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them on reg (never the global registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_events_total", Help: "Platform events handed to the bridge, by platform and kind.",
		}, []string{"platform", "kind"}),
		apiCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_api_calls_total", Help: "AI workspace API calls, by operation and HTTP status (0: no response).",
		}, []string{"operation", "status"}),
		apiLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flowbridge_api_call_duration_seconds", Help: "AI workspace API call latency, by operation.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"operation"}),
		flowRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_flow_runs_total", Help: "Flow runs, by flow and outcome.",
		}, []string{"flow", "outcome"}),
		queueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowbridge_queue_depth", Help: "Events waiting in conversation queues.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flowbridge_in_flight_calls", Help: "AI workspace calls in flight.",
		}),
		dedup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_deduplicated_events_total", Help: "Platform redeliveries that were recognised and dropped, by platform.",
		}, []string{"platform"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_refusals_total", Help: "Requests refused, by reason.",
		}, []string{"reason"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_store_errors_total", Help: "Store writes that failed, by operation (receive, mark_sent, put_reply, finish, put_turns, save_session).",
		}, []string{"operation"}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_recovered_events_total", Help: "Unfinished events of a previous process found at start, by platform and what was done: resumed (never sent, processed now), reposted (its answer was kept, and is posted now unless it was already) or told (may have been sent; the user was told).",
		}, []string{"platform", "action"}),
		undelivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_undelivered_replies_total", Help: "Answers the platform had not accepted, by platform and what became of them: kept (in the outbox at shutdown, posted by the next start) or told (given up after the retry budget; the user was told).",
		}, []string{"platform", "outcome"}),
		votes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowbridge_feedback_total", Help: "Votes on agent replies, by agent and vote (up, down): each first vote and each change; pressing the same button again is not counted.",
		}, []string{"agent", "vote"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.apiCalls, m.apiLatency, m.flowRuns, m.queueDepth, m.inFlight, m.dedup, m.refusals, m.storeErrs, m.recovered, m.undelivered, m.votes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveAPI records one AI workspace call; pass it as workspace.Config.Observe.
func (m *Metrics) ObserveAPI(op string, status int, elapsed time.Duration) {
	if m == nil {
		return
	}
	m.apiCalls.WithLabelValues(op, strconv.Itoa(status)).Inc()
	m.apiLatency.WithLabelValues(op).Observe(elapsed.Seconds())
}

func (m *Metrics) event(platform string, k Kind) {
	if m != nil {
		m.events.WithLabelValues(platform, k.String()).Inc()
	}
}

func (m *Metrics) flowRun(flow, outcome string) {
	if m != nil {
		m.flowRuns.WithLabelValues(flow, outcome).Inc()
	}
}

func (m *Metrics) queued(n int) {
	if m != nil {
		m.queueDepth.Add(float64(n))
	}
}

func (m *Metrics) inflight(n int) {
	if m != nil {
		m.inFlight.Add(float64(n))
	}
}

func (m *Metrics) deduplicated(platform string) {
	if m != nil {
		m.dedup.WithLabelValues(platform).Inc()
	}
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) storeFailed(op string) {
	if m != nil {
		m.storeErrs.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) recoveredEvent(platform, action string) {
	if m != nil {
		m.recovered.WithLabelValues(platform, action).Inc()
	}
}

func (m *Metrics) delivery(platform, outcome string) {
	if m != nil {
		m.undelivered.WithLabelValues(platform, outcome).Inc()
	}
}

func (m *Metrics) feedback(agent, vote string) {
	if m != nil {
		m.votes.WithLabelValues(agent, vote).Inc()
	}
}
