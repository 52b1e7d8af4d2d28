package route

// shares returns the share of first attempts each account takes, given the accounts'
// configured weights and health levels (0 healthy … steps no traffic). An account at level
// h keeps weight·(steps−h)/steps of its weight; what the degraded accounts give up goes to
// the healthy (level 0) accounts with a weight, in proportion to their weights, or, when no
// weighted account is healthy, in equal parts to the healthy standbys (weight 0). So a
// standby takes traffic only while the others are unhealthy, and only the part they gave
// up: a step at a time. When every account is degraded, each keeps its own reduced weight;
// when nothing is left at all (every account at the last step) the configured weights
// apply, and the probes decide who recovers first. The shares add up to 1.
func shares(weights, levels []int, steps int) []float64 {
	n := len(weights)
	eff := make([]float64, n)
	var removed, healthyWeight float64
	healthyStandbys := 0
	for i, w := range weights {
		lv := float64(min(max(levels[i], 0), steps))
		eff[i] = float64(w) * (float64(steps) - lv) / float64(steps)
		removed += float64(w) * lv / float64(steps)
		if levels[i] <= 0 {
			if w > 0 {
				healthyWeight += float64(w)
			} else {
				healthyStandbys++
			}
		}
	}
	for i, w := range weights {
		if levels[i] > 0 {
			continue
		}
		switch {
		case healthyWeight > 0 && w > 0:
			eff[i] += removed * float64(w) / healthyWeight
		case healthyWeight == 0 && w == 0 && healthyStandbys > 0:
			eff[i] += removed / float64(healthyStandbys)
		}
	}
	total := 0.0
	for _, e := range eff {
		total += e
	}
	if total == 0 { // every account at its last step
		for i, w := range weights {
			eff[i] = float64(w)
			total += float64(w)
		}
	}
	for i := range eff {
		eff[i] /= total
	}
	return eff
}

// pick returns the index whose cumulative share first passes r ∈ [0, 1).
func pick(sh []float64, r float64) int {
	acc := 0.0
	last := 0
	for i, s := range sh {
		if s <= 0 {
			continue
		}
		acc += s
		last = i
		if r < acc {
			return i
		}
	}
	return last // r rounded past the sum
}

// failoverShares are the shares of a retry that must leave account avoid (its last attempt
// failed there): the first-attempt shares without avoid, renormalised; if those are all zero
// (avoid is a healthy primary that had one failure, and the others are standbys), every other
// account that still takes traffic (below the last step) gets an equal part; if none does,
// avoid keeps the retry.
func failoverShares(weights, levels []int, steps, avoid int) []float64 {
	sh := shares(weights, levels, steps)
	out := make([]float64, len(sh))
	total := 0.0
	for i, s := range sh {
		if i != avoid {
			out[i] = s
			total += s
		}
	}
	if total == 0 {
		for i := range out {
			if i != avoid && levels[i] < steps {
				out[i] = 1
				total++
			}
		}
	}
	if total == 0 {
		out[avoid] = 1
		return out
	}
	for i := range out {
		out[i] /= total
	}
	return out
}
