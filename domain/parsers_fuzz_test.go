package domain_test

import (
	"strings"
	"testing"

	"github.com/agentbus/agentbus/domain"
)

// FuzzParseUSD: every amount ParseUSD accepts prints back to itself, and
// survives a JSON round trip, so a budget is never changed by being shown
// or stored. The seed corpus is in testdata/fuzz/FuzzParseUSD.
func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{"12.5", "0.000000001", "-3", ".5", "9223372035.999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := domain.ParseUSD(s)
		if err != nil {
			return
		}
		back, err := domain.ParseUSD(v.String())
		if err != nil || back != v {
			t.Fatalf("%q parsed to %d, printed %q, parsed back to %d (%v)", s, v, v.String(), back, err)
		}
		raw, err := v.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var u domain.USD
		if err := u.UnmarshalJSON(raw); err != nil || u != v {
			t.Fatalf("%q: JSON %s read back as %d (%v)", s, raw, u, err)
		}
	})
}

// FuzzValidateCron: the validator never panics, refuses anything without
// five fields, and judges an expression by its fields alone (extra
// whitespace changes nothing). The seed corpus is in
// testdata/fuzz/FuzzValidateCron.
func FuzzValidateCron(f *testing.F) {
	for _, s := range []string{"*/15 9-17 * * MON-FRI", "0 0 1 JAN,JUL *", "@daily", "60 * * * *", "1-2/3,*/5 * * * 7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		err := domain.ValidateCron(expr)
		fields := strings.Fields(expr)
		if err == nil && len(fields) != 5 {
			t.Fatalf("accepted %q with %d fields", expr, len(fields))
		}
		if again := domain.ValidateCron(" " + strings.Join(fields, "  ") + "\t"); (again == nil) != (err == nil) {
			t.Fatalf("%q: %v, respaced: %v", expr, err, again)
		}
	})
}
