// Package e2e holds whole-replica benchmarks: server, hub and runner in one
// process on a real database, driven over real HTTP and websockets.
//
// Only its benchmarks import the module's packages; nothing imports it.
package e2e
