package evaluate

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/hpcq/hpcq/pkg/schema"
)

// Bootstraps are the resamples of a metric's bootstrap interval.
const Bootstraps = 2000

// spread is the noise of the metric made of byInput's repeats (the
// inputs in order): the quartiles of each input's repeats, combined over
// the inputs as the metric is (one input: its own), and the 2.5th and
// 97.5th percentiles of the metric over Bootstraps resamples of every
// input's repeats, drawn with a generator seeded by the values (the same
// report gives the same interval). nil when an input has fewer than 2
// repeats: one sample has no spread to tell.
func spread(inputs []string, byInput map[string][]float64) *schema.Spread {
	var q1s, q3s []InputMetric
	h := fnv.New64a()
	n := 0
	for _, in := range inputs {
		xs := byInput[in]
		if len(xs) < 2 {
			return nil
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		q1s = append(q1s, InputMetric{Input: in, Median: quantile(s, 0.25)})
		q3s = append(q3s, InputMetric{Input: in, Median: quantile(s, 0.75)})
		for _, x := range s {
			h.Write([]byte(in))
			var b [8]byte
			u := math.Float64bits(x)
			for i := range b {
				b[i] = byte(u >> (8 * i))
			}
			h.Write(b[:])
		}
		n += len(xs)
	}
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x9e3779b97f4a7c15))
	metrics := make([]float64, Bootstraps)
	per := make([]InputMetric, len(inputs))
	var draw []float64
	for b := range metrics {
		for i, in := range inputs {
			xs := byInput[in]
			draw = draw[:0]
			for range xs {
				draw = append(draw, xs[rng.IntN(len(xs))])
			}
			per[i] = InputMetric{Input: in, Median: median(draw)}
		}
		metrics[b] = combine(per)
	}
	slices.Sort(metrics)
	s := &schema.Spread{Q1: combine(q1s), Q3: combine(q3s), Low: quantile(metrics, 0.025), High: quantile(metrics, 0.975), N: n}
	for _, v := range []float64{s.Q1, s.Q3, s.Low, s.High} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	return s
}

// quantile is the q-quantile of sorted xs, linear between the two nearest
// ranks (R's type 7, numpy's default).
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	i := int(math.Floor(pos))
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	f := pos - float64(i)
	return sorted[i] + f*(sorted[i+1]-sorted[i])
}
