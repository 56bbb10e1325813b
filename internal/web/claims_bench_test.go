package web

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// BenchmarkClaimRoundTrip: one claim over HTTP (POST …/claim, the
// compare-and-swap and its event in one transaction), released again
// between claims; p50 and p99 of the claim's round trip (target p99 ≤ 10 ms).
func BenchmarkClaimRoundTrip(b *testing.B) {
	e := setup(b, withRunner())
	id := e.createFeature("Claim bench")
	itr := e.waitPending(id, "prd")
	secret, _, err := e.auth.CreateToken(context.Background(), "bench", "claimer", auth.RoleApprover)
	if err != nil {
		b.Fatal(err)
	}
	path := e.base + "/api/v1/interrupts/" + itr.ID + "/claim"
	send := func(method string) time.Duration {
		req, _ := http.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		d := time.Since(start)
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("%s claim: %v %v", method, err, res)
		}
		res.Body.Close()
		return d
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, send(http.MethodPost))
		b.StopTimer()
		send(http.MethodDelete)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.5), "p50_ms")
	b.ReportMetric(ms(0.99), "p99_ms")
}
