package domain

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// USD is an amount of US dollars in nano-dollars (1e-9). Costs are summed
// over thousands of small usage updates and compared with a hard cap, so
// the model uses exact integers instead of floats; a nano-dollar is finer
// than any per-token price, and int64 still holds 9 billion dollars.
type USD int64

// nanosPerDollar is the scale of USD.
const nanosPerDollar = 1_000_000_000

// Dollars returns d whole dollars.
func Dollars(d int64) USD { return USD(d * nanosPerDollar) }

// USDFromFloat converts a float amount (as the engine reports cost),
// rounded to the nearest nano-dollar. NaN and infinities are rejected.
func USDFromFloat(f float64) (USD, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > float64(math.MaxInt64/nanosPerDollar) {
		return 0, invalid("costUsd", "must be a finite amount")
	}
	return USD(math.Round(f * nanosPerDollar)), nil
}

// ParseUSD parses a decimal amount such as "12.5" or "0.000123".
func ParseUSD(s string) (USD, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || len(frac) > 9 || strings.ContainsAny(whole+frac, "+-eE ") {
		return 0, invalid("amount", "must be a decimal amount with at most 9 decimals, got %q", s)
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/nanosPerDollar-1 {
		return 0, invalid("amount", "must be a decimal amount, got %q", s)
	}
	var f int64
	if frac != "" {
		f, err = strconv.ParseInt(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
		if err != nil {
			return 0, invalid("amount", "must be a decimal amount, got %q", s)
		}
	}
	v := USD(w*nanosPerDollar + f)
	if neg {
		v = -v
	}
	return v, nil
}

// Nanos returns the amount in nano-dollars, for storage.
func (u USD) Nanos() int64 { return int64(u) }

// Float64 returns the amount in dollars, for display and percentages.
func (u USD) Float64() float64 { return float64(u) / nanosPerDollar }

// String formats the amount with as few decimals as needed ("12.5").
func (u USD) String() string {
	sign := ""
	n := int64(u)
	if n < 0 {
		sign, n = "-", -n
	}
	whole, frac := n/nanosPerDollar, n%nanosPerDollar
	if frac == 0 {
		return fmt.Sprintf("%s%d", sign, whole)
	}
	return strings.TrimRight(fmt.Sprintf("%s%d.%09d", sign, whole, frac), "0")
}

// MarshalJSON writes the amount as a JSON number ("spentUsd": 12.5).
func (u USD) MarshalJSON() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalJSON reads a JSON number or a numeric string.
func (u *USD) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	v, err := ParseUSD(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*u = v
	return nil
}

// percentOf returns part as a percentage of whole (0 when whole is 0).
func percentOf(part, whole USD) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole) * 100
}
