package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUSDShowsSmallAmountsTruly(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "$0.00"}, {0.0024, "$0.0024"}, {0.037, "$0.037"}, {0.5, "$0.50"}, {1, "$1.00"}, {12.345, "$12.35"},
	} {
		assert.Equal(t, tc.want, usd(tc.in), "%v", tc.in)
	}
}
