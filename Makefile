# Gatehouse developer tasks. `make test` is the test command CI runs.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go

.PHONY: run test generate bench lint build pg-start pg-stop pg-url

## run: build bin/gatehouse and serve it against DATABASE_URL, or the private cluster when unset
run: build
	@if [ -z "$${DATABASE_URL:-}" ]; then \
		bash scripts/pg.sh start; \
		DATABASE_URL="$$(bash scripts/pg.sh url)"; \
		export DATABASE_URL; \
	fi; \
	exec bin/gatehouse serve

## test: all tests with the race detector (starts the private cluster on demand)
test:
	$(GO) test -race -count=1 -timeout 30m ./...

## generate: sqlc queries and templ components
generate:
	$(GO) tool sqlc generate
	$(GO) tool templ generate

## bench: benchmarks; prints the BENCH/RATIO summary lines
bench:
	bash scripts/bench.sh

## lint: formatting and vet
lint:
	@out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## build: static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -o bin/gatehouse ./cmd/web

pg-start:
	bash scripts/pg.sh start

pg-stop:
	bash scripts/pg.sh stop

pg-url:
	@bash scripts/pg.sh url
