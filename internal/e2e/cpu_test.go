package e2e_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter measures the CPU time a benchmark costs: this process's, and
// that of the PostgreSQL backends serving its database. Wall-clock rates
// on a shared two-core machine swing with whatever else runs; CPU time per
// step hardly does, so it is the figure to compare changes by.
type cpuMeter struct {
	pool     *pgxpool.Pool
	self, pg time.Duration
}

func startCPU(b *testing.B, pool *pgxpool.Pool) *cpuMeter {
	m := &cpuMeter{pool: pool}
	m.self, m.pg = selfCPU(), m.backendCPU(b)
	return m
}

// stop returns the CPU time spent since start: this process, PostgreSQL.
func (m *cpuMeter) stop(b *testing.B) (self, pg time.Duration) {
	return selfCPU() - m.self, m.backendCPU(b) - m.pg
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU sums utime+stime of the backends connected to the pool's
// database, read from /proc (the cluster runs on this machine). Backends
// that come and go between two readings are missed; the pool keeps its
// connections, so they are few.
func (m *cpuMeter) backendCPU(b *testing.B) time.Duration {
	rows, err := m.pool.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var total time.Duration
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		total += procCPU(pid)
	}
	return total
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

func procCPU(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks
}
