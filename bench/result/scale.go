package result

import (
	"math"
	"os"
	"strconv"
	"time"
)

// Scale is BENCH_SCALE: the factor every scenario multiplies its sizes and durations by
// (1 when unset or not a positive number). 0.1 is a quick look; 0.01 is what CI runs.
func Scale() float64 {
	s, err := strconv.ParseFloat(os.Getenv("BENCH_SCALE"), 64)
	if err != nil || s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return 1
	}
	return s
}

// Scaled is n × Scale(), never below floor: the size a scenario uses for a nominal n.
func Scaled(n, floor int) int {
	return max(int(math.Round(float64(n)*Scale())), floor)
}

// ScaledDuration is d × Scale(), never below floor.
func ScaledDuration(d, floor time.Duration) time.Duration {
	return max(time.Duration(float64(d)*Scale()), floor)
}
