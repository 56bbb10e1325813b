#!/usr/bin/env bash
# Runs the benchmarks and prints one figure a line:
#   BENCH <name>: <value> <unit>
#   RATIO <name>: <x>
# Each figure is the median of BENCH_COUNT runs (default 3). Ratios come from
# benchmarks that measure both sides in the same loop, so that both see the
# same fsync regime of the machine (it swings between runs).
# PostgreSQL: DATABASE_URL when set, else the private cluster (scripts/pg.sh).
# The raw `go test` output is kept in ${BENCH_OUT:-/tmp/gatehouse-bench.out}.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

count="${BENCH_COUNT:-3}"
benchtime="${BENCH_TIME:-2s}"
out="${BENCH_OUT:-/tmp/gatehouse-bench.out}"

if [[ -z "${DATABASE_URL:-}" ]]; then
	bash scripts/pg.sh start >&2
fi

# -p 1: packages one after another, so benchmarks do not share the cores.
go test -p 1 -run '^$' -bench "${BENCH_FILTER:-.}" -benchtime="$benchtime" -count="$count" ./... >"$out" 2>&1 || {
	cat "$out" >&2
	exit 1
}

# The figures: benchmark|unit, the BENCH name, and the unit printed ("-": the
# benchmark's own). A figure is printed when its benchmark ran, in the order
# the benchmarks ran.
figures='
BenchmarkMemStep|us/step	mem_step	-
BenchmarkTimers10k|last_fired_after_due_ms	timers_10k_last_fired_after_due_ms	-
BenchmarkTimers10k|idle_wakeups/s	timers_idle_wakeups_per_s	-
BenchmarkClaimRoundTrip|p50_ms	claim_p50	-
BenchmarkClaimRoundTrip|p99_ms	claim_p99	-
BenchmarkPresence|join_p50_ms	presence_join_p50	-
BenchmarkPresence|join_p99_ms	presence_join_p99	-
BenchmarkPresence|leave_p50_ms	presence_leave_p50	-
BenchmarkPresence|leave_p99_ms	presence_leave_p99	-
BenchmarkPresence|p99_ms	presence_p99_ms	ms
BenchmarkPGStepVsFloor|us/step	pg_step	-
BenchmarkPGStepVsFloor|floor_us/op	floor_upsert	us/op
BenchmarkPGStoreStepVsFloor|us/step	pg_store_step	-
BenchmarkPGForkVsStep|us/fork	pg_fork	-
BenchmarkPGForkVsStep|us/step	pg_fork_baseline_step	-
BenchmarkPGGateCycle|us/cycle	pg_gate_cycle	-
BenchmarkPGTask|us/task	pg_task	-
BenchmarkFloorUpsert|us/op	floor_upsert_alone	-
BenchmarkApprovalRoundTrip/tasks=1|p50_ms	approval_p50_1task	ms
BenchmarkApprovalRoundTrip/tasks=1|p99_ms	approval_p99_1task	ms
BenchmarkApprovalRoundTrip/tasks=16|p50_ms	approval_p50_16tasks	ms
BenchmarkApprovalRoundTrip/tasks=16|p99_ms	approval_p99_16tasks	ms
BenchmarkThroughput16|tasks/s	throughput_16_tasks	-
BenchmarkThroughput16|steps/s	throughput_16_steps	-
BenchmarkThroughput16|floor_ops/s	floor_upsert_16conns	ops/s
BenchmarkThroughput16|go_cpu_us/step	throughput_16_go_cpu	us/step
BenchmarkThroughput16|pg_cpu_us/step	throughput_16_pg_cpu	us/step
BenchmarkThroughput16|floor_go_cpu_us/op	floor_16conns_go_cpu	us/op
BenchmarkThroughput16|floor_pg_cpu_us/op	floor_16conns_pg_cpu	us/op
BenchmarkThroughput16|commits/batch	group_commit_size	-
BenchmarkApprovalRoundTrip/tasks=16|go_cpu_us/decision	approval_16tasks_go_cpu	us/decision
BenchmarkApprovalRoundTrip/tasks=16|pg_cpu_us/decision	approval_16tasks_pg_cpu	us/decision
BenchmarkDeskDashboard|p95_ms	desk_dashboard_p95_ms_10k_tasks	-
BenchmarkDeskInbox|p95_ms	desk_inbox_p95_ms_1k_pending	-
BenchmarkDeskLiveFanout|p50_ms	desk_live_p50_ms_1k_sockets	-
BenchmarkDeskLiveFanout|p99_ms	desk_live_p99_ms_1k_sockets	-
BenchmarkDeskLiveFanout|B/conn	desk_live_bytes_per_idle_socket	-
BenchmarkDeskLiveFanout|B/conn_over_bare	desk_live_bytes_per_idle_socket_over_bare	-
BenchmarkDeskLiveFanout5000|p50_ms	desk_live_p50_ms_5k_sockets	-
BenchmarkDeskLiveFanout5000|p99_ms	desk_live_p99_ms_5k_sockets	-
BenchmarkDeskLiveFanout5000|B/conn	desk_live_bytes_per_idle_socket_5k	-
BenchmarkDeskLiveFanout5000|B/conn_over_bare	desk_live_bytes_per_idle_socket_over_bare_5k	-
BenchmarkDeskLiveFanout|B/conn_after_events	desk_live_bytes_per_socket_after_events	-
BenchmarkDeskLiveFanout5000|B/conn_after_events	desk_live_bytes_per_socket_after_events_5k	-
BenchmarkDeskLiveFanout|server_cpu_ms/event	desk_live_server_cpu_ms_per_event_1k_sockets	ms/event
BenchmarkDeskLiveFanout5000|server_cpu_ms/event	desk_live_server_cpu_ms_per_event_5k_sockets	ms/event
BenchmarkDeskDiff10kLines|ms/diff	desk_diff_10k_lines_ms	-
BenchmarkScale/dashboard|p95_ms	scale_1m_dashboard_p95_ms	-
BenchmarkScale/inbox_first|p95_ms	scale_1m_inbox_first_page_p95_ms	-
BenchmarkScale/inbox_last|p95_ms	scale_1m_inbox_last_page_p95_ms	-
BenchmarkScale/task_page|p95_ms	scale_1m_task_page_p95_ms	-
BenchmarkScale/claim|p99_ms	scale_1m_claim_p99_ms	-
BenchmarkScale/prune|p95_ms	scale_1m_prune_hour_p95_ms	-
BenchmarkStateSize|wal_1k_B/step	state_1k_wal_bytes_per_step	B/step
BenchmarkStateSize|wal_64k_B/step	state_64k_wal_bytes_per_step	B/step
BenchmarkStateSize|wal_1m_B/step	state_1m_wal_bytes_per_step	B/step
BenchmarkStateSize|us_1k/step	state_1k_step	us/step
BenchmarkStateSize|us_64k/step	state_64k_step	us/step
BenchmarkStateSize|us_1m/step	state_1m_step	us/step
BenchmarkMCPGetRequest|p50_ms	mcp_get_request_p50	-
BenchmarkMCPWaitReturn|p99_ms	mcp_wait_return_p99	-
BenchmarkLangGraphResume|native_p50_ms	approval_native_p50_same_run	ms
BenchmarkLangGraphResume|langgraph_p50_ms	langgraph_resume_p50	ms
BenchmarkLangGraphResume|langgraph_end_p50_ms	langgraph_resume_to_end_p50	ms
BenchmarkAnalytics90Days|p50_ms	analytics_p50_ms_1m_decisions_90d	ms
BenchmarkAnalytics90Days|p95_ms	analytics_p95_ms_1m_decisions_90d	ms
BenchmarkAnalytics90Days|api_p95_ms	analytics_api_p95_ms_1m_decisions_90d	ms
BenchmarkOutboxApproval|p50_ms_without	approval_p50_16tasks_no_webhook	ms
BenchmarkOutboxApproval|p50_ms_with	approval_p50_16tasks_webhook	ms
BenchmarkOutboxApproval|pg_cpu_us/round_without	approval_16tasks_no_webhook_pg_cpu	us/round
BenchmarkOutboxApproval|pg_cpu_us/round_with	approval_16tasks_webhook_pg_cpu	us/round
BenchmarkOutboxApproval|go_cpu_us/round_without	approval_16tasks_no_webhook_go_cpu	us/round
BenchmarkOutboxApproval|go_cpu_us/round_with	approval_16tasks_webhook_go_cpu	us/round
BenchmarkWebhook1000|s/1000	webhook_1000_deliveries	s
BenchmarkRequestCreate|p50_ms	request_create_p50	ms
BenchmarkRequestCreate|p99_ms	request_create_p99	ms
BenchmarkRequestWaitReturn|p50_ms	request_wait_return_p50	ms
BenchmarkRequestWaitReturn|p99_ms	request_wait_return_p99	ms
BenchmarkRequestWaiters1000|db_conns	request_waiters_1000_db_conns	conns
BenchmarkRequestWaiters1000|rss_mb	request_waiters_1000_rss_mb	MiB
BenchmarkRequestWaiters1000|rss_delta_mb	request_waiters_1000_rss_delta_mb	MiB
BenchmarkRuleEval|us/eval	rule_eval_us	us
BenchmarkRuleEval|cpu_us/eval	rule_eval_cpu_us	us
'

# The ratios: benchmark|unit, the RATIO name, the target it is divided by
# (1: the benchmark reports a ratio itself), and a note.
ratios='
BenchmarkPGStepVsFloor|ratio	pg_step_vs_floor	1
# the load and commits of the same run, sent by the store alone without the engine:
# pg_step_vs_floor less this is the share of the engine
BenchmarkPGStoreStepVsFloor|ratio	pg_store_step_vs_floor	1
# a fork in node steps of the same run (target: at most 2)
BenchmarkPGForkVsStep|fork_steps	fork_vs_node_step	1
BenchmarkTimers10k|last_fired_after_due_ms	timers_10k_vs_2s_target	2000
BenchmarkPresence|join_p99_ms	presence_join_p99_vs_200ms_target	200
BenchmarkPresence|p99_ms	presence_p99_vs_200ms_target	200
BenchmarkDeskLiveFanout5000|p99_ms	desk_live_p99_5k_vs_250ms_target	250
BenchmarkDeskLiveFanout5000|B/conn	desk_live_bytes_per_idle_socket_5k_vs_40000_target	40000
BenchmarkClaimRoundTrip|p99_ms	claim_p99_vs_10ms_target	10
BenchmarkThroughput16|ratio	throughput_16_vs_floor	1
BenchmarkStateSize|ratio_1m_vs_1k	state_1m_vs_1k_step	1
BenchmarkLangGraphResume|ratio_p50	langgraph_resume_vs_native_approval_p50	1	(target <= 1.3)
BenchmarkOutboxApproval|ratio	approval_16tasks_webhook_vs_none	1	(target <= 1.1)
BenchmarkRequestCreate|p99_ms	request_create_p99_vs_10ms_target	10
BenchmarkRequestWaitReturn|p99_ms	request_wait_return_p99_vs_50ms_target	50
BenchmarkRequestWaiters1000|db_conns	request_waiters_1000_db_conns_vs_2_target	2
BenchmarkRuleEval|us/eval	rule_eval_us_vs_50us_target	50
BenchmarkThroughput16|cpu_ratio	throughput_16_cpu_per_step_vs_floor_op	1
'

awk -v figures="$figures" -v ratios="$ratios" '
function median(key,    n, i, j, tmp, arr) {
	n = split(vals[key], arr, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] + 0 < arr[i] + 0) { tmp = arr[i]; arr[i] = arr[j]; arr[j] = tmp }
	return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 3; i + 1 <= NF; i += 2) {
		key = name "|" $(i + 1)
		if (!(key in vals)) order[++n] = key
		vals[key] = vals[key] " " $i
	}
}
END {
	nf = split(figures, rows, "\n")
	for (r = 1; r <= nf; r++) {
		if (split(rows[r], col, "\t") < 3) continue
		fig[col[1]] = col[2]
		if (col[3] != "-") unit[col[1]] = col[3]
	}
	for (k = 1; k <= n; k++) {
		key = order[k]
		if (key in fig) {
			split(key, p, "|")
			u = (key in unit) ? unit[key] : p[2]
			printf "BENCH %s: %.2f %s\n", fig[key], median(key), u
		}
	}
	nr = split(ratios, rows, "\n")
	for (r = 1; r <= nr; r++) {
		if (rows[r] ~ /^#/ || split(rows[r], col, "\t") < 3 || !(col[1] in vals)) continue
		printf "RATIO %s: %.2f%s\n", col[2], median(col[1]) / col[3], (col[4] != "") ? " " col[4] : ""
	}
}' "$out"
