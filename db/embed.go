// Package db holds the SQL of Gatehouse: goose migrations (also sqlc's
// schema) and sqlc queries. The migrations are embedded so the binary can
// migrate the database it is pointed at.
//
// It imports nothing of the module; internal/postgres migrates with it.
package db

import "embed"

// Migrations are the goose migration files, in order.
//
//go:embed migrations/*.sql
var Migrations embed.FS
