package main

// Discovery as Multica's daemon does it (server/internal/daemon/agents_probe.go, daemon.go):
// `dsh --version` must only exit 0 (any output), then `dsh --profile multica --probe` must exit 0
// with a probe line for runtime "dsh", protocol 1. And the model catalog of `--list-models`
// (server/pkg/agent/dsh.go discoverDshModels), turned into the picker's shape.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// dshBinary is DSH_BIN when it is an absolute path, else `dsh` on PATH (Multica: MULTICA_DSH_PATH,
// else PATH, re-checked at each run).
func dshBinary(env []string) (string, error) {
	if bin := envValue(env, "DSH_BIN"); filepath.IsAbs(bin) {
		if info, err := os.Stat(bin); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return bin, nil
		}
		return "", fmt.Errorf("DSH_BIN %s is not an executable file", bin)
	}
	for _, dir := range filepath.SplitList(envValue(env, "PATH")) {
		candidate := filepath.Join(dir, "dsh")
		if info, err := os.Stat(candidate); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", errors.New("dsh executable not found (set DSH_BIN or put dsh on PATH)")
}

// shortCommand runs a one-shot dsh command in its own process group, killed with it at the
// bound; stdout, and the exit error (nil for exit 0).
func shortCommand(env []string, bound time.Duration, args ...string) ([]byte, error) {
	binary, err := dshBinary(env)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Run()
	if cmd.Process != nil {
		killGroup(cmd.Process.Pid, time.Second)
	}
	if ctx.Err() != nil {
		return stdout.Bytes(), fmt.Errorf("no answer within %s", bound)
	}
	return stdout.Bytes(), err
}

// Discovered is the driver's `discovered` reply without its envelope.
type Discovered struct {
	Available  bool     `json:"available"`
	Version    *string  `json:"version"`
	Warnings   []string `json:"warnings"`
	Diagnostic *string  `json:"diagnostic"`
	Code       *string  `json:"code"`
}

func discover(env []string, profile string) Discovered {
	out := Discovered{Warnings: []string{}}
	unavailable := func(code, diagnostic string) Discovered {
		out.Code, out.Diagnostic = &code, &diagnostic
		return out
	}
	stdout, err := shortCommand(env, 10*time.Second, "--version")
	if err != nil {
		if strings.Contains(err.Error(), "not found") || strings.Contains(err.Error(), "not an executable") {
			return unavailable("BINARY_NOT_FOUND", err.Error())
		}
		return unavailable("VERSION_FAILED", "version detection failed: "+err.Error())
	}
	if first, _, _ := strings.Cut(strings.TrimSpace(string(stdout)), "\n"); first != "" {
		out.Version = &first
	}
	stdout, err = shortCommand(env, 5*time.Second, "--profile", profile, "--probe")
	if err != nil || !ProbeAccepted(stdout, runtimeOf(profile)) {
		return unavailable("PROBE_FAILED",
			fmt.Sprintf("dsh has no compatible %s profile: run `dsh plugin --profile %s add <bundle>`", profile, profile))
	}
	out.Available = true
	return out
}

// runtimeOf is the runtime id a profile's probe must name.
func runtimeOf(profile string) string {
	if profile == "multica" {
		return "dsh"
	}
	return profile
}

// CatalogModel is one model of the driver's `models` reply.
type CatalogModel struct {
	Provider         string           `json:"provider"`
	ProviderName     string           `json:"provider_name,omitempty"`
	ID               string           `json:"id"`
	Name             string           `json:"name"`
	ReasoningOptions []map[string]any `json:"reasoning_options"`
}

// Catalog is the driver's `models` reply without its envelope.
type Catalog struct {
	Available  bool           `json:"available"`
	Code       *string        `json:"code"`
	Diagnostic *string        `json:"diagnostic"`
	Models     []CatalogModel `json:"models"`
}

func listModels(env []string, profile string) Catalog {
	failed := func(code, diagnostic string) Catalog {
		return Catalog{Code: &code, Diagnostic: &diagnostic, Models: []CatalogModel{}}
	}
	stdout, err := shortCommand(env, 10*time.Second, "--profile", profile, "--list-models")
	if err != nil {
		return failed("MODELS_FAILED", "dsh model discovery failed: "+err.Error())
	}
	catalog := Catalog{Available: true, Models: []CatalogModel{}}
	seen := map[string]bool{}
	for _, entry := range ModelsFrames(stdout) {
		model, ok := catalogModel(entry)
		if !ok || seen[model.Provider+"/"+model.ID] {
			continue
		}
		seen[model.Provider+"/"+model.ID] = true
		catalog.Models = append(catalog.Models, model)
	}
	if len(catalog.Models) == 0 {
		return failed("MODELS_EMPTY", "dsh returned an empty model catalog")
	}
	return catalog
}

// catalogModel splits a `provider/model` id at the first "/" and unescapes each half (dsh.go
// parseDshModelID); thinking levels become reasoning options, the default level marked.
func catalogModel(entry ModelEntry) (CatalogModel, bool) {
	rawProvider, rawID, found := strings.Cut(entry.ID, "/")
	provider, err1 := url.PathUnescape(rawProvider)
	id, err2 := url.PathUnescape(rawID)
	if !found || err1 != nil || err2 != nil || provider == "" || id == "" {
		return CatalogModel{}, false
	}
	name := entry.Label
	if name == "" {
		name = id
	}
	model := CatalogModel{Provider: provider, ProviderName: entry.Provider, ID: id, Name: name,
		ReasoningOptions: []map[string]any{}}
	if entry.Thinking != nil {
		seen := map[string]bool{}
		for _, level := range entry.Thinking.SupportedLevels {
			if level.Value == "" || seen[level.Value] {
				continue
			}
			seen[level.Value] = true
			option := map[string]any{"id": level.Value, "name": level.Label}
			if level.Label == "" {
				option["name"] = level.Value
			}
			if level.Value == entry.Thinking.DefaultLevel {
				option["default"] = true
			}
			model.ReasoningOptions = append(model.ReasoningOptions, option)
		}
	}
	return model, true
}

// envValue is NAME's value in an environment list ("" when absent).
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if value, ok := strings.CutPrefix(env[i], name+"="); ok {
			return value
		}
	}
	return ""
}
