package config

import (
	"io"
	"log/slog"
)

// Logger is the logger the settings ask for: GATEHOUSE_LOG_LEVEL and
// GATEHOUSE_LOG_FORMAT (text or json), writing to w.
func (c Config) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
