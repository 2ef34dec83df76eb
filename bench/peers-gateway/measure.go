package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sample is one engine's measurement in one row and round.
type sample struct {
	callsPerSec float64
	p50, p99    time.Duration
	cpuPerCall  float64 // µs of the engine's processes per call; -1 without a process
	peakKiB     int64   // the largest VmHWM of the engine's processes during the measurement
	calls       int64
}

// drive runs agents goroutines calling call(agent, i) for d, and measures
// the calls, their latency, and the CPU time and peak RSS of pids.
func drive(agents int, d time.Duration, pids []int, call func(agent int, i int64) error) (sample, error) {
	for _, pid := range pids {
		resetPeakRSS(pid)
	}
	var cpu0 int64
	for _, pid := range pids {
		cpu0 += cpuTicks(pid)
	}
	var (
		wg      sync.WaitGroup
		failure atomic.Pointer[error]
		seq     atomic.Int64
		stop    atomic.Bool
	)
	lat := make([][]time.Duration, agents)
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for a := range agents {
		wg.Go(func() {
			own := make([]time.Duration, 0, 4096)
			for !stop.Load() {
				i := seq.Add(1)
				t0 := time.Now()
				if err := call(a, i); err != nil {
					failure.CompareAndSwap(nil, &err)
					stop.Store(true)
					return
				}
				own = append(own, time.Since(t0))
			}
			lat[a] = own
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failure.Load(); err != nil {
		return sample{}, *err
	}
	var cpu1, peak int64
	for _, pid := range pids {
		cpu1 += cpuTicks(pid)
		peak = max(peak, peakRSS(pid))
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	s := sample{
		callsPerSec: float64(len(all)) / elapsed.Seconds(),
		p50:         percentile(all, 0.50),
		p99:         percentile(all, 0.99),
		cpuPerCall:  -1,
		peakKiB:     peak,
		calls:       int64(len(all)),
	}
	if len(pids) > 0 && len(all) > 0 {
		s.cpuPerCall = float64(cpu1-cpu0) * 1e6 / ticksPerSecond / float64(len(all))
	}
	return s, nil
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// series is the samples of one engine in one row, one per round.
type series []sample

func (s series) med(f func(sample) float64) float64 {
	xs := make([]float64, len(s))
	for i, x := range s {
		xs[i] = f(x)
	}
	return median(xs)
}

// ratio is the median over the rounds of a's throughput over b's in the
// same round (paired: both ran within seconds of each other).
func ratio(a, b series) float64 {
	var xs []float64
	for i := range min(len(a), len(b)) {
		if b[i].callsPerSec > 0 {
			xs = append(xs, a[i].callsPerSec/b[i].callsPerSec)
		}
	}
	return median(xs)
}

// added is the median over the rounds of a's percentile minus b's, in ms.
func added(a, b series, p func(sample) time.Duration) float64 {
	var xs []float64
	for i := range min(len(a), len(b)) {
		xs = append(xs, ms(p(a[i])-p(b[i])))
	}
	return median(xs)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", 100*x)
}

func cpuStr(s series) string {
	v := s.med(func(x sample) float64 { return x.cpuPerCall })
	if v < 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f µs", v)
}

func rssStr(s series) string {
	var peak int64
	for _, x := range s {
		peak = max(peak, x.peakKiB)
	}
	if peak == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f MiB", float64(peak)/1024)
}

// rotate is xs rotated left by n.
func rotate[T any](xs []T, n int) []T {
	if len(xs) == 0 {
		return xs
	}
	n %= len(xs)
	return append(slices.Clone(xs[n:]), xs[:n]...)
}

func signed(x float64) string {
	return fmt.Sprintf("%+.2f", x)
}

func joinRow(cells ...string) string { return "| " + strings.Join(cells, " | ") + " |" }
