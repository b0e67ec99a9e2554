package main

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3} // unsorted on purpose
	for _, tc := range []struct{ p, want float64 }{
		{0, 1}, {25, 2}, {50, 3}, {75, 4}, {100, 5},
		{10, 1.4}, {90, 4.6}, {-5, 1}, {150, 5},
	} {
		if got := percentile(xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if xs[0] != 5 {
		t.Error("percentile sorted its input in place")
	}
}

func TestPercentileEdges(t *testing.T) {
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("empty: want NaN")
	}
	if got := percentile([]float64{7}, 99); got != 7 {
		t.Errorf("single: %v", got)
	}
	if got := median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("even median: %v", got)
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.N != 100 || s.Max != 100*time.Millisecond {
		t.Fatalf("%+v", s)
	}
	if s.P50 != 50500*time.Microsecond {
		t.Errorf("p50 %v", s.P50)
	}
	if s.P99 < 99*time.Millisecond || s.P99 > 100*time.Millisecond {
		t.Errorf("p99 %v", s.P99)
	}
	if (summarize(nil) != latencySummary{}) {
		t.Error("empty summary not zero")
	}
}

func TestMinMaxAndMedianOf(t *testing.T) {
	lo, hi := minMax([]float64{3, -1, 8, 2})
	if lo != -1 || hi != 8 {
		t.Errorf("minMax %v %v", lo, hi)
	}
	type r struct{ v float64 }
	if got := medianOf([]r{{3}, {1}, {2}}, func(x r) float64 { return x.v }); got != 2 {
		t.Errorf("medianOf %v", got)
	}
}

func TestRatioSummary(t *testing.T) {
	med, lo, hi := ratioSummary([]float64{2, 6, 3}, []float64{1, 2, 2})
	if med != 2 || lo != 1.5 || hi != 3 {
		t.Errorf("ratioSummary = %v, %v, %v; want 2, 1.5, 3", med, lo, hi)
	}
}
