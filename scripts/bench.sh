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

# name map: Benchmark name + unit → figure name
awk '
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
	fig["BenchmarkMemStep|us/step"] = "BENCH mem_step"
	fig["BenchmarkTimers10k|last_fired_after_due_ms"] = "BENCH timers_10k_last_fired_after_due_ms"
	fig["BenchmarkTimers10k|idle_wakeups/s"] = "BENCH timers_idle_wakeups_per_s"
	fig["BenchmarkClaimRoundTrip|p50_ms"] = "BENCH claim_p50"
	fig["BenchmarkClaimRoundTrip|p99_ms"] = "BENCH claim_p99"
	fig["BenchmarkPresence|join_p50_ms"] = "BENCH presence_join_p50"
	fig["BenchmarkPresence|join_p99_ms"] = "BENCH presence_join_p99"
	fig["BenchmarkPresence|leave_p50_ms"] = "BENCH presence_leave_p50"
	fig["BenchmarkPresence|leave_p99_ms"] = "BENCH presence_leave_p99"
	fig["BenchmarkPresence|p99_ms"] = "BENCH presence_p99_ms"
	unit["BenchmarkPresence|p99_ms"] = "ms"
	fig["BenchmarkPGStepVsFloor|us/step"] = "BENCH pg_step"
	fig["BenchmarkPGStepVsFloor|floor_us/op"] = "BENCH floor_upsert"
	fig["BenchmarkPGStoreStepVsFloor|us/step"] = "BENCH pg_store_step"
	fig["BenchmarkPGForkVsStep|us/fork"] = "BENCH pg_fork"
	fig["BenchmarkPGForkVsStep|us/step"] = "BENCH pg_fork_baseline_step"
	fig["BenchmarkPGGateCycle|us/cycle"] = "BENCH pg_gate_cycle"
	fig["BenchmarkPGTask|us/task"] = "BENCH pg_task"
	fig["BenchmarkFloorUpsert|us/op"] = "BENCH floor_upsert_alone"
	fig["BenchmarkApprovalRoundTrip/tasks=1|p50_ms"] = "BENCH approval_p50_1task"
	fig["BenchmarkApprovalRoundTrip/tasks=1|p99_ms"] = "BENCH approval_p99_1task"
	fig["BenchmarkApprovalRoundTrip/tasks=16|p50_ms"] = "BENCH approval_p50_16tasks"
	fig["BenchmarkApprovalRoundTrip/tasks=16|p99_ms"] = "BENCH approval_p99_16tasks"
	fig["BenchmarkThroughput16|tasks/s"] = "BENCH throughput_16_tasks"
	fig["BenchmarkThroughput16|steps/s"] = "BENCH throughput_16_steps"
	fig["BenchmarkThroughput16|floor_ops/s"] = "BENCH floor_upsert_16conns"
	fig["BenchmarkThroughput16|go_cpu_us/step"] = "BENCH throughput_16_go_cpu"
	fig["BenchmarkThroughput16|pg_cpu_us/step"] = "BENCH throughput_16_pg_cpu"
	fig["BenchmarkThroughput16|floor_go_cpu_us/op"] = "BENCH floor_16conns_go_cpu"
	fig["BenchmarkThroughput16|floor_pg_cpu_us/op"] = "BENCH floor_16conns_pg_cpu"
	fig["BenchmarkThroughput16|commits/batch"] = "BENCH group_commit_size"
	fig["BenchmarkApprovalRoundTrip/tasks=16|go_cpu_us/decision"] = "BENCH approval_16tasks_go_cpu"
	fig["BenchmarkApprovalRoundTrip/tasks=16|pg_cpu_us/decision"] = "BENCH approval_16tasks_pg_cpu"
	unit["BenchmarkThroughput16|go_cpu_us/step"] = "us/step"
	unit["BenchmarkThroughput16|pg_cpu_us/step"] = "us/step"
	unit["BenchmarkThroughput16|floor_go_cpu_us/op"] = "us/op"
	unit["BenchmarkThroughput16|floor_pg_cpu_us/op"] = "us/op"
	unit["BenchmarkApprovalRoundTrip/tasks=16|go_cpu_us/decision"] = "us/decision"
	unit["BenchmarkApprovalRoundTrip/tasks=16|pg_cpu_us/decision"] = "us/decision"
	fig["BenchmarkDeskDashboard|p95_ms"] = "BENCH desk_dashboard_p95_ms_10k_tasks"
	fig["BenchmarkDeskInbox|p95_ms"] = "BENCH desk_inbox_p95_ms_1k_pending"
	fig["BenchmarkDeskLiveFanout|p50_ms"] = "BENCH desk_live_p50_ms_1k_sockets"
	fig["BenchmarkDeskLiveFanout|p99_ms"] = "BENCH desk_live_p99_ms_1k_sockets"
	fig["BenchmarkDeskLiveFanout|B/conn"] = "BENCH desk_live_bytes_per_idle_socket"
	fig["BenchmarkDeskLiveFanout|B/conn_over_bare"] = "BENCH desk_live_bytes_per_idle_socket_over_bare"
	fig["BenchmarkDeskLiveFanout5000|p50_ms"] = "BENCH desk_live_p50_ms_5k_sockets"
	fig["BenchmarkDeskLiveFanout5000|p99_ms"] = "BENCH desk_live_p99_ms_5k_sockets"
	fig["BenchmarkDeskLiveFanout5000|B/conn"] = "BENCH desk_live_bytes_per_idle_socket_5k"
	fig["BenchmarkDeskLiveFanout5000|B/conn_over_bare"] = "BENCH desk_live_bytes_per_idle_socket_over_bare_5k"
	fig["BenchmarkDeskLiveFanout|B/conn_after_events"] = "BENCH desk_live_bytes_per_socket_after_events"
	fig["BenchmarkDeskLiveFanout5000|B/conn_after_events"] = "BENCH desk_live_bytes_per_socket_after_events_5k"
	fig["BenchmarkDeskLiveFanout|server_cpu_ms/event"] = "BENCH desk_live_server_cpu_ms_per_event_1k_sockets"
	fig["BenchmarkDeskLiveFanout5000|server_cpu_ms/event"] = "BENCH desk_live_server_cpu_ms_per_event_5k_sockets"
	unit["BenchmarkDeskLiveFanout|server_cpu_ms/event"] = "ms/event"
	unit["BenchmarkDeskLiveFanout5000|server_cpu_ms/event"] = "ms/event"
	fig["BenchmarkDeskDiff10kLines|ms/diff"] = "BENCH desk_diff_10k_lines_ms"
	fig["BenchmarkScale/dashboard|p95_ms"] = "BENCH scale_1m_dashboard_p95_ms"
	fig["BenchmarkScale/inbox_first|p95_ms"] = "BENCH scale_1m_inbox_first_page_p95_ms"
	fig["BenchmarkScale/inbox_last|p95_ms"] = "BENCH scale_1m_inbox_last_page_p95_ms"
	fig["BenchmarkScale/task_page|p95_ms"] = "BENCH scale_1m_task_page_p95_ms"
	fig["BenchmarkScale/claim|p99_ms"] = "BENCH scale_1m_claim_p99_ms"
	fig["BenchmarkScale/prune|p95_ms"] = "BENCH scale_1m_prune_hour_p95_ms"
	fig["BenchmarkStateSize|wal_1k_B/step"] = "BENCH state_1k_wal_bytes_per_step"
	fig["BenchmarkStateSize|wal_64k_B/step"] = "BENCH state_64k_wal_bytes_per_step"
	fig["BenchmarkStateSize|wal_1m_B/step"] = "BENCH state_1m_wal_bytes_per_step"
	fig["BenchmarkStateSize|us_1k/step"] = "BENCH state_1k_step"
	fig["BenchmarkStateSize|us_64k/step"] = "BENCH state_64k_step"
	fig["BenchmarkStateSize|us_1m/step"] = "BENCH state_1m_step"
	unit["BenchmarkStateSize|wal_1k_B/step"] = "B/step"
	unit["BenchmarkStateSize|wal_64k_B/step"] = "B/step"
	unit["BenchmarkStateSize|wal_1m_B/step"] = "B/step"
	unit["BenchmarkStateSize|us_1k/step"] = "us/step"
	unit["BenchmarkStateSize|us_64k/step"] = "us/step"
	unit["BenchmarkStateSize|us_1m/step"] = "us/step"
	fig["BenchmarkMCPGetRequest|p50_ms"] = "BENCH mcp_get_request_p50"
	fig["BenchmarkMCPWaitReturn|p99_ms"] = "BENCH mcp_wait_return_p99"
	fig["BenchmarkLangGraphResume|native_p50_ms"] = "BENCH approval_native_p50_same_run"
	fig["BenchmarkLangGraphResume|langgraph_p50_ms"] = "BENCH langgraph_resume_p50"
	fig["BenchmarkLangGraphResume|langgraph_end_p50_ms"] = "BENCH langgraph_resume_to_end_p50"
	unit["BenchmarkLangGraphResume|native_p50_ms"] = "ms"
	unit["BenchmarkLangGraphResume|langgraph_p50_ms"] = "ms"
	unit["BenchmarkLangGraphResume|langgraph_end_p50_ms"] = "ms"
	fig["BenchmarkAnalytics90Days|p50_ms"] = "BENCH analytics_p50_ms_1m_decisions_90d"
	fig["BenchmarkAnalytics90Days|p95_ms"] = "BENCH analytics_p95_ms_1m_decisions_90d"
	fig["BenchmarkAnalytics90Days|api_p95_ms"] = "BENCH analytics_api_p95_ms_1m_decisions_90d"
	unit["BenchmarkAnalytics90Days|p50_ms"] = "ms"
	unit["BenchmarkAnalytics90Days|p95_ms"] = "ms"
	unit["BenchmarkAnalytics90Days|api_p95_ms"] = "ms"
	unit["BenchmarkPGStepVsFloor|floor_us/op"] = "us/op"
	unit["BenchmarkThroughput16|floor_ops/s"] = "ops/s"
	unit["BenchmarkApprovalRoundTrip/tasks=1|p50_ms"] = "ms"
	unit["BenchmarkApprovalRoundTrip/tasks=1|p99_ms"] = "ms"
	unit["BenchmarkApprovalRoundTrip/tasks=16|p50_ms"] = "ms"
	unit["BenchmarkApprovalRoundTrip/tasks=16|p99_ms"] = "ms"
	fig["BenchmarkOutboxApproval|p50_ms_without"] = "BENCH approval_p50_16tasks_no_webhook"
	fig["BenchmarkOutboxApproval|p50_ms_with"] = "BENCH approval_p50_16tasks_webhook"
	unit["BenchmarkOutboxApproval|p50_ms_without"] = "ms"
	unit["BenchmarkOutboxApproval|p50_ms_with"] = "ms"
	fig["BenchmarkOutboxApproval|pg_cpu_us/round_without"] = "BENCH approval_16tasks_no_webhook_pg_cpu"
	fig["BenchmarkOutboxApproval|pg_cpu_us/round_with"] = "BENCH approval_16tasks_webhook_pg_cpu"
	fig["BenchmarkOutboxApproval|go_cpu_us/round_without"] = "BENCH approval_16tasks_no_webhook_go_cpu"
	fig["BenchmarkOutboxApproval|go_cpu_us/round_with"] = "BENCH approval_16tasks_webhook_go_cpu"
	unit["BenchmarkOutboxApproval|pg_cpu_us/round_without"] = "us/round"
	unit["BenchmarkOutboxApproval|pg_cpu_us/round_with"] = "us/round"
	unit["BenchmarkOutboxApproval|go_cpu_us/round_without"] = "us/round"
	unit["BenchmarkOutboxApproval|go_cpu_us/round_with"] = "us/round"
	fig["BenchmarkWebhook1000|s/1000"] = "BENCH webhook_1000_deliveries"
	unit["BenchmarkWebhook1000|s/1000"] = "s"
	fig["BenchmarkRequestCreate|p50_ms"] = "BENCH request_create_p50"
	fig["BenchmarkRequestCreate|p99_ms"] = "BENCH request_create_p99"
	unit["BenchmarkRequestCreate|p50_ms"] = "ms"
	unit["BenchmarkRequestCreate|p99_ms"] = "ms"
	fig["BenchmarkRequestWaitReturn|p50_ms"] = "BENCH request_wait_return_p50"
	fig["BenchmarkRequestWaitReturn|p99_ms"] = "BENCH request_wait_return_p99"
	unit["BenchmarkRequestWaitReturn|p50_ms"] = "ms"
	unit["BenchmarkRequestWaitReturn|p99_ms"] = "ms"
	fig["BenchmarkRequestWaiters1000|db_conns"] = "BENCH request_waiters_1000_db_conns"
	fig["BenchmarkRequestWaiters1000|rss_mb"] = "BENCH request_waiters_1000_rss_mb"
	fig["BenchmarkRequestWaiters1000|rss_delta_mb"] = "BENCH request_waiters_1000_rss_delta_mb"
	unit["BenchmarkRequestWaiters1000|db_conns"] = "conns"
	unit["BenchmarkRequestWaiters1000|rss_mb"] = "MiB"
	unit["BenchmarkRequestWaiters1000|rss_delta_mb"] = "MiB"
	fig["BenchmarkRuleEval|us/eval"] = "BENCH rule_eval_us"
	unit["BenchmarkRuleEval|us/eval"] = "us"
	fig["BenchmarkRuleEval|cpu_us/eval"] = "BENCH rule_eval_cpu_us"
	unit["BenchmarkRuleEval|cpu_us/eval"] = "us"
	for (k = 1; k <= n; k++) {
		key = order[k]
		if (key in fig) {
			split(key, p, "|")
			u = (key in unit) ? unit[key] : p[2]
			printf "%s: %.2f %s\n", fig[key], median(key), u
		}
	}
	if ("BenchmarkPGStepVsFloor|ratio" in vals)
		printf "RATIO pg_step_vs_floor: %.2f\n", median("BenchmarkPGStepVsFloor|ratio")
	# the load and commits of the same run, sent by the store alone without the
	# engine: pg_step_vs_floor less this is the share of the engine
	if ("BenchmarkPGStoreStepVsFloor|ratio" in vals)
		printf "RATIO pg_store_step_vs_floor: %.2f\n", median("BenchmarkPGStoreStepVsFloor|ratio")
	# a fork in node steps of the same run (target: at most 2)
	if ("BenchmarkPGForkVsStep|fork_steps" in vals)
		printf "RATIO fork_vs_node_step: %.2f\n", median("BenchmarkPGForkVsStep|fork_steps")
	if ("BenchmarkTimers10k|last_fired_after_due_ms" in vals)
		printf "RATIO timers_10k_vs_2s_target: %.2f\n", median("BenchmarkTimers10k|last_fired_after_due_ms") / 2000
	if ("BenchmarkPresence|join_p99_ms" in vals)
		printf "RATIO presence_join_p99_vs_200ms_target: %.2f\n", median("BenchmarkPresence|join_p99_ms") / 200
	if ("BenchmarkPresence|p99_ms" in vals)
		printf "RATIO presence_p99_vs_200ms_target: %.2f\n", median("BenchmarkPresence|p99_ms") / 200
	if ("BenchmarkDeskLiveFanout5000|p99_ms" in vals)
		printf "RATIO desk_live_p99_5k_vs_250ms_target: %.2f\n", median("BenchmarkDeskLiveFanout5000|p99_ms") / 250
	if ("BenchmarkDeskLiveFanout5000|B/conn" in vals)
		printf "RATIO desk_live_bytes_per_idle_socket_5k_vs_40000_target: %.2f\n", median("BenchmarkDeskLiveFanout5000|B/conn") / 40000
	if ("BenchmarkClaimRoundTrip|p99_ms" in vals)
		printf "RATIO claim_p99_vs_10ms_target: %.2f\n", median("BenchmarkClaimRoundTrip|p99_ms") / 10
	if ("BenchmarkThroughput16|ratio" in vals)
		printf "RATIO throughput_16_vs_floor: %.2f\n", median("BenchmarkThroughput16|ratio")
	if ("BenchmarkStateSize|ratio_1m_vs_1k" in vals)
		printf "RATIO state_1m_vs_1k_step: %.2f\n", median("BenchmarkStateSize|ratio_1m_vs_1k")
	if ("BenchmarkLangGraphResume|ratio_p50" in vals)
		printf "RATIO langgraph_resume_vs_native_approval_p50: %.2f (target <= 1.3)\n", median("BenchmarkLangGraphResume|ratio_p50")
	if ("BenchmarkOutboxApproval|ratio" in vals)
		printf "RATIO approval_16tasks_webhook_vs_none: %.2f (target <= 1.1)\n", median("BenchmarkOutboxApproval|ratio")
	if ("BenchmarkRequestCreate|p99_ms" in vals)
		printf "RATIO request_create_p99_vs_10ms_target: %.2f\n", median("BenchmarkRequestCreate|p99_ms") / 10
	if ("BenchmarkRequestWaitReturn|p99_ms" in vals)
		printf "RATIO request_wait_return_p99_vs_50ms_target: %.2f\n", median("BenchmarkRequestWaitReturn|p99_ms") / 50
	if ("BenchmarkRequestWaiters1000|db_conns" in vals)
		printf "RATIO request_waiters_1000_db_conns_vs_2_target: %.2f\n", median("BenchmarkRequestWaiters1000|db_conns") / 2
	if ("BenchmarkRuleEval|us/eval" in vals)
		printf "RATIO rule_eval_us_vs_50us_target: %.2f\n", median("BenchmarkRuleEval|us/eval") / 50
	if ("BenchmarkThroughput16|cpu_ratio" in vals)
		printf "RATIO throughput_16_cpu_per_step_vs_floor_op: %.2f\n", median("BenchmarkThroughput16|cpu_ratio")
}' "$out"
