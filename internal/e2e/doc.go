// Package e2e holds whole-replica benchmarks: server, hub and runner in one
// process on a real database, driven over real HTTP and websockets.
package e2e
