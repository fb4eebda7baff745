package observe

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// An AddressState is what the metrics say of one address of a backend.
type AddressState struct {
	Address string
	// State is ready, connecting, down, not_serving or draining.
	State string
	// Calls counts the calls sent to the address since it joined the
	// backend's set, Ejections the times outlier detection ejected it.
	Calls, Ejections uint64
}

// AddressStates lists the states of backend_addresses, each reported at
// every scrape (0 when no address is in it).
var AddressStates = []string{"ready", "connecting", "down", "not_serving", "ejected", "draining"}

var (
	addressesDesc = prometheus.NewDesc(metricPrefix+"backend_addresses",
		"Addresses of the backend, by state: ready, connecting, down, not_serving (health checking), ejected (outlier detection) or draining (removed, with calls in flight).",
		[]string{"backend", "state"}, nil)
	addressCallsDesc = prometheus.NewDesc(metricPrefix+"backend_address_calls_total",
		"Calls sent to each address of the backend, both call paths, since the address joined its set.",
		[]string{"backend", "address"}, nil)
	ejectionsDesc = prometheus.NewDesc(metricPrefix+"backend_ejections_total",
		"Times outlier detection ejected each address of the backend from the rotation, since the address joined its set.",
		[]string{"backend", "address"}, nil)
)

// addressCollector reports the addresses of each watched backend.
type addressCollector struct {
	mu       sync.Mutex
	backends []watchedAddresses
}

type watchedAddresses struct {
	backend string
	f       func() []AddressState
}

// WatchAddresses makes every scrape report the addresses of backend that
// f returns.
func (m *Metrics) WatchAddresses(backend string, f func() []AddressState) {
	if m == nil {
		return
	}
	m.addrOnce.Do(func() {
		m.addresses = new(addressCollector)
		m.reg.MustRegister(m.addresses)
	})
	m.addresses.mu.Lock()
	defer m.addresses.mu.Unlock()
	m.addresses.backends = append(m.addresses.backends, watchedAddresses{backend, f})
}

func (c *addressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- addressesDesc
	ch <- addressCallsDesc
	ch <- ejectionsDesc
}

func (c *addressCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	backends := append([]watchedAddresses(nil), c.backends...)
	c.mu.Unlock()
	for _, b := range backends {
		counts := make(map[string]int, len(AddressStates))
		for _, a := range b.f() {
			counts[a.State]++
			ch <- prometheus.MustNewConstMetric(addressCallsDesc, prometheus.CounterValue, float64(a.Calls), b.backend, a.Address)
			ch <- prometheus.MustNewConstMetric(ejectionsDesc, prometheus.CounterValue, float64(a.Ejections), b.backend, a.Address)
		}
		for _, st := range AddressStates {
			ch <- prometheus.MustNewConstMetric(addressesDesc, prometheus.GaugeValue, float64(counts[st]), b.backend, st)
		}
	}
}
