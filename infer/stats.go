package infer

import (
	"math"
	"slices"
)

// t975 is Student's t quantile 0.975 for 1–30 degrees of freedom: the
// half-width of a 95 % interval in standard errors.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// tQuantile is the 0.975 quantile of Student's t with dof degrees of
// freedom (dof ≥ 1); beyond the table, 1.96 + 2.4/dof, within 0.002 of it.
func tQuantile(dof int) float64 {
	if dof <= len(t975) {
		return t975[max(dof, 1)-1]
	}
	return 1.96 + 2.4/float64(dof)
}

// medianRanks returns the 1-based ranks (lo, hi) of the order statistics
// that bound a 95 % distribution-free interval for the median of n values
// (the sign test): [x(lo), x(hi)]. Below 6 values they are the extremes,
// which hold the median with 1 − 2·2⁻ⁿ (94 % for 5, 88 % for 4, 75 % for 3).
func medianRanks(n int) (lo, hi int) {
	half := 1.96 * math.Sqrt(float64(n)) / 2
	lo = int(math.Floor(float64(n)/2 - half))
	hi = int(math.Ceil(float64(n)/2+half)) + 1
	return max(lo, 1), min(hi, n)
}

// median returns the median of v, v not empty, reordering v: in time
// linear in len(v) (selectK), where a sort would take n log n.
func median(v []float64) float64 {
	n := len(v)
	m := selectK(v, n/2)
	if n%2 == 1 {
		return m
	}
	return (slices.Max(v[:n/2]) + m) / 2
}

// medianInterval returns the median of v with the 95 % distribution-free
// interval of medianRanks, v not empty, reordering v.
func medianInterval(v []float64) (mid, lo, hi float64) {
	mid = median(v)
	n := len(v)
	l, h := medianRanks(n)
	// selectK left v[:n/2] at most and v[n/2+1:] at least v[n/2].
	lo, hi = v[n/2], v[n/2]
	if l-1 < n/2 {
		lo = selectK(v[:n/2], l-1)
	}
	if h-1 > n/2 {
		hi = selectK(v[n/2+1:], h-1-(n/2+1))
	}
	return mid, lo, hi
}

// selectK reorders v so that v[k] is the value a sort would put there,
// those before it no greater and those after no smaller, and returns it
// (Hoare's selection, the pivot the median of three).
func selectK(v []float64, k int) float64 {
	lo, hi := 0, len(v)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		i, j := lo, hi
		for i <= j {
			for v[i] < pivot {
				i++
			}
			for v[j] > pivot {
				j--
			}
			if i <= j {
				v[i], v[j] = v[j], v[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return v[k]
		}
	}
	return v[k]
}

// logBias is the mean of ln U for U uniform on [1−j, 1+j], 0 ≤ j < 1: how
// far below the log of a backoff the mean log of its jittered draws lies
// (−j²/6 and a little more).
func logBias(j float64) float64 {
	if j < 1e-3 {
		// The closed form below cancels badly for small j.
		return -j * j / 6
	}
	f := func(x float64) float64 { return x*math.Log(x) - x } // ∫ ln x dx
	return (f(1+j) - f(1-j)) / (2 * j)
}
