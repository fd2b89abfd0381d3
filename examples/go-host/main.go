// Command go-host is a dsh host written after Multica's Go daemon (multica-ai/multica,
// server/pkg/agent/dsh.go): it drives `$DSH_BIN --profile multica --stdio` per Multica's
// lifecycle and speaks the dsh-conformance driver protocol (docs/host-driver.md) on
// stdin/stdout, so the kit can judge it. Standard library only.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const driverName, driverVersion = "go-host", "0.1.0"

// capabilities: no `setup` (Multica has no installer: users run `dsh plugin --profile multica
// add`), no `reuse` (a Go driver starts in milliseconds).
var capabilities = []string{"discover", "sessions", "cancel", "restart", "concurrent", "models"}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go-host: "+format+"\n", args...)
}

// Driver serves driver requests; runs go on beside the request loop.
type Driver struct {
	out        io.Writer // where replies go (stdout)
	profile    string
	supervisor string
	env        []string
	bounds     Bounds
	store      *Store

	writeMu sync.Mutex
	runsMu  sync.Mutex
	runs    map[string]*Turn
	running sync.WaitGroup
}

func (d *Driver) reply(reply map[string]any) {
	reply["v"] = 1
	var line bytes.Buffer
	encoder := json.NewEncoder(&line) // one line, "\n"-terminated; <, > and & as themselves
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(reply); err != nil {
		logf("cannot encode a reply: %v", err)
		return
	}
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	_, _ = d.out.Write(line.Bytes())
}

func (d *Driver) fail(id any, message string) {
	d.reply(map[string]any{"type": "error", "id": id, "message": message})
}

// handle is one request line; false once the driver should stop.
func (d *Driver) handle(line []byte) bool {
	var request map[string]json.RawMessage
	if err := json.Unmarshal(line, &request); err != nil {
		d.fail(nil, "request is not a JSON object")
		return true
	}
	var kind, id string
	var version int
	_ = json.Unmarshal(request["type"], &kind)
	idErr := json.Unmarshal(request["id"], &id)
	if json.Unmarshal(request["v"], &version) != nil || version != 1 {
		d.fail(nullable(id), "unsupported driver protocol version (v must be 1)")
		return true
	}
	if kind != "handshake" && kind != "shutdown" && (idErr != nil || id == "") {
		d.fail(nil, fmt.Sprintf("%s needs a string id", kind))
		return true
	}
	switch kind {
	case "handshake":
		d.reply(map[string]any{"type": "handshake", "driver": driverName, "version": driverVersion,
			"capabilities": capabilities})
	case "discover":
		found := discover(d.env, d.profile)
		d.reply(map[string]any{"type": "discovered", "id": id, "available": found.Available,
			"version": found.Version, "warnings": found.Warnings, "diagnostic": found.Diagnostic, "code": found.Code})
	case "models":
		found := listModels(d.env, d.profile)
		d.reply(map[string]any{"type": "models", "id": id, "available": found.Available, "code": found.Code,
			"diagnostic": found.Diagnostic, "models": found.Models})
	case "run":
		var run RunRequest
		if err := json.Unmarshal(line, &run); err != nil || run.ConversationID == "" || run.Cwd == "" {
			d.fail(id, "run needs conversation_id, cwd and prompt strings")
			return true
		}
		if run.Model == nil && run.Route == nil {
			d.fail(id, "run needs model {provider, id} or a route")
			return true
		}
		d.startRun(run)
	case "cancel":
		d.runsMu.Lock()
		turn := d.runs[id]
		d.runsMu.Unlock()
		if turn != nil {
			turn.Cancel()
		}
	case "shutdown":
		d.stop()
		d.reply(map[string]any{"type": "bye"})
		return false
	default:
		d.fail(nullable(id), fmt.Sprintf("unsupported request type %q", kind))
	}
	return true
}

func (d *Driver) startRun(run RunRequest) {
	turn := &Turn{req: run, env: d.env, profile: d.profile, supervisor: d.supervisor, bounds: d.bounds,
		store: d.store, cancelled: make(chan struct{})}
	turn.emit = func(event map[string]any) {
		d.reply(map[string]any{"type": "event", "id": run.ID, "event": event})
	}
	d.runsMu.Lock()
	d.runs[run.ID] = turn
	d.runsMu.Unlock()
	d.running.Add(1)
	go func() {
		defer d.running.Done()
		outcome := turn.Run()
		d.runsMu.Lock()
		delete(d.runs, run.ID)
		d.runsMu.Unlock()
		d.reply(map[string]any{"type": "outcome", "id": run.ID, "status": outcome.Status,
			"session_id": outcome.SessionID, "resumed": outcome.Resumed, "code": outcome.Code,
			"message": outcome.Message, "foreign_frames": outcome.ForeignFrames, "stderr": outcome.Stderr})
	}()
}

// stop cancels every run in flight and waits until each has reported its outcome.
func (d *Driver) stop() {
	d.runsMu.Lock()
	for _, turn := range d.runs {
		turn.Cancel()
	}
	d.runsMu.Unlock()
	d.running.Wait()
}

func nullable(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// boundsFromEnv: GO_HOST_HANDSHAKE_MS, GO_HOST_RUN_MS, GO_HOST_CANCEL_GRACE_MS,
// GO_HOST_TERMINATE_GRACE_MS, GO_HOST_AFTER_RESULT_MS, GO_HOST_DRAIN_MS.
func boundsFromEnv() Bounds {
	bounds := DefaultBounds
	for name, field := range map[string]*time.Duration{"HANDSHAKE": &bounds.Handshake, "RUN": &bounds.Run,
		"CANCEL_GRACE": &bounds.CancelGrace, "TERMINATE_GRACE": &bounds.TerminateGrace,
		"AFTER_RESULT": &bounds.AfterResult, "DRAIN": &bounds.Drain} {
		if ms, err := strconv.Atoi(os.Getenv("GO_HOST_" + name + "_MS")); err == nil && ms >= 0 {
			*field = time.Duration(ms) * time.Millisecond
		}
	}
	return bounds
}

func main() {
	profile := flag.String("profile", "multica",
		"the dsh profile to drive (multica; open-design to gate against a gen-1 runtime)")
	supervisor := flag.String("supervisor", "", "the path of dsh-conformance, to run each runtime under its `supervise`")
	flag.Parse()
	if *profile == "" || strings.ContainsAny(*profile, " /") {
		logf("-profile needs a profile name")
		os.Exit(2)
	}
	env := os.Environ()
	driver := &Driver{out: os.Stdout, profile: *profile, supervisor: *supervisor, env: env, bounds: boundsFromEnv(),
		store: NewStore(envValue(env, "RUNTIME_DATA_DIR")), runs: map[string]*Turn{}}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-signals
		driver.stop()
		os.Exit(0)
	}()
	input := bufio.NewReader(os.Stdin)
	for {
		line, err := input.ReadBytes('\n')
		if trimmed := strings.TrimSpace(string(line)); trimmed != "" {
			if !driver.handle([]byte(trimmed)) {
				return
			}
		}
		if err != nil {
			driver.stop()
			return
		}
	}
}
