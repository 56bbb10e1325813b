package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// policyFile is the example's policy, relative to the repository's root.
const policyFile = "examples/refund/policy.yaml"

// withDefaults is getenv with the example's defaults: DATABASE_URL from
// the private cluster of scripts/pg.sh (started if need be) when unset,
// as make run does, and GATEHOUSE_POLICY_FILE naming policy.yaml.
func withDefaults(getenv func(string) string) (func(string) string, error) {
	set := map[string]string{}
	if getenv("DATABASE_URL") == "" {
		url, err := privateCluster()
		if err != nil {
			return nil, err
		}
		set["DATABASE_URL"] = url
	}
	if getenv("GATEHOUSE_POLICY_FILE") == "" {
		if _, err := os.Stat(policyFile); err == nil {
			set["GATEHOUSE_POLICY_FILE"] = policyFile
		}
	}
	return func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return getenv(k)
	}, nil
}

// privateCluster starts the private PostgreSQL cluster of scripts/pg.sh
// and returns its URL.
func privateCluster() (string, error) {
	if _, err := os.Stat("scripts/pg.sh"); err != nil {
		return "", errors.New("DATABASE_URL is not set, and scripts/pg.sh is not here: " +
			"set DATABASE_URL, or run from the repository's root")
	}
	start := exec.Command("bash", "scripts/pg.sh", "start")
	start.Stdout, start.Stderr = os.Stderr, os.Stderr
	if err := start.Run(); err != nil {
		return "", fmt.Errorf("scripts/pg.sh start: %w", err)
	}
	out, err := exec.Command("bash", "scripts/pg.sh", "url").Output()
	if err != nil {
		return "", fmt.Errorf("scripts/pg.sh url: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
