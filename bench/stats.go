package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 <= p <= 100) of xs by linear
// interpolation between the closest ranks (the "type 7" estimator used by
// most statistics packages). xs need not be sorted; it is not modified. It
// returns NaN for an empty slice.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

// percentileSorted is percentile on an already sorted slice.
func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	if p <= 0 {
		return s[0]
	}
	if p >= 100 {
		return s[len(s)-1]
	}
	h := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(s) {
		return s[lo]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// median is the 50th percentile.
func median(xs []float64) float64 { return percentile(xs, 50) }

// latencySummary is what the report shows of a set of durations.
type latencySummary struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize summarizes ds; the zero summary for no data.
func summarize(ds []time.Duration) latencySummary {
	if len(ds) == 0 {
		return latencySummary{}
	}
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = float64(d)
	}
	slices.Sort(s)
	return latencySummary{
		N:   len(s),
		P50: time.Duration(percentileSorted(s, 50)),
		P99: time.Duration(percentileSorted(s, 99)),
		Max: time.Duration(s[len(s)-1]),
	}
}

// medianOf returns the median of f applied to each element of xs.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		v = append(v, f(x))
	}
	return median(v)
}

// minMax returns the smallest and largest of xs (NaN, NaN if empty).
func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	lo, hi = xs[0], xs[0]
	for _, x := range xs[1:] {
		lo = min(lo, x)
		hi = max(hi, x)
	}
	return lo, hi
}

// ratioSummary divides each run's figure in xs by the same run's in base
// and returns the median ratio and its range.
func ratioSummary(xs, base []float64) (med, lo, hi float64) {
	ratios := make([]float64, 0, len(xs))
	for r := range xs {
		ratios = append(ratios, xs[r]/base[r])
	}
	lo, hi = minMax(ratios)
	return median(ratios), lo, hi
}
