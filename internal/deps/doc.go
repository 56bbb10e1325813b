// Package deps keeps the import directions of the module's layout
// (docs/architecture.md): its test fails when a package imports what it
// must not. It holds no code.
package deps
