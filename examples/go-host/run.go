package main

// One task, as Multica's daemon drives `dsh --profile multica --stdio` (server/pkg/agent/dsh.go,
// the newer PR #7169 lifecycle), with the process hygiene Multica intends (proc.go: signal "the
// entire tree") and the resume check its integration test makes ("DSH resume changed session
// ID"):
//
//  1. spawn: one process per attempt, its own process group, cwd = the workdir, the session root
//     in MULTICA_DSH_SESSION_ROOT;
//  2. ready: wait for the first `ready` (10 s), then write `execute`;
//  3. stream: read frames leniently (a line that does not decode is skipped, the last `result`
//     wins); the first session id is pinned at once;
//  4. end: wait for stdout EOF and exit (3 s after a result, then the cancel escalation); stdin is
//     never closed; a cancel is `cancel`, 3 s, SIGTERM group, 2 s, SIGKILL group;
//  5. reap: once the runtime exited, SIGKILL what is left of its group and every process carrying
//     the run's token;
//  6. retry: a failed resume that the runtime rejected (and that ran no tool) runs once more as a
//     new session in a new process;
//  7. outcome: completed, cancelled, or failed with Multica's error text.

import (
	"bufio"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Bounds are the lifecycle's time bounds (GO_HOST_<NAME>_MS overrides each).
type Bounds struct {
	Handshake, Run, CancelGrace, TerminateGrace, AfterResult, Drain time.Duration
}

// DefaultBounds: Multica's handshake (10 s), cancel grace (3 s) and terminate grace (2 s); a run
// bound standing in for MULTICA_AGENT_TIMEOUT (whose default is none); the wait for exit after a
// result; how long stdout may stay open after the runtime exited.
var DefaultBounds = Bounds{10 * time.Second, 15 * time.Second, 3 * time.Second, 2 * time.Second,
	3 * time.Second, 500 * time.Millisecond}

// RunRequest is the driver's `run` (docs/host-driver.md).
type RunRequest struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversation_id"`
	ProjectID      string  `json:"project_id"`
	Cwd            string  `json:"cwd"`
	Prompt         string  `json:"prompt"`
	Bootstrap      *string `json:"bootstrap"`
	Model          *Model  `json:"model"`
	Route          *string `json:"route"`
	Effort         *string `json:"reasoning_effort"`
}

// Model is `execute.model`.
type Model struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
}

// Outcome is the driver's `outcome` without its envelope.
type Outcome struct {
	Status        string  `json:"status"`
	SessionID     *string `json:"session_id"`
	Resumed       bool    `json:"resumed"`
	Code          *string `json:"code"`
	Message       *string `json:"message"`
	ForeignFrames int     `json:"foreign_frames"`
	Stderr        string  `json:"stderr"`
}

// Turn is one task in flight.
type Turn struct {
	req     RunRequest
	env     []string
	profile string
	// supervisor, when set, is the path of dsh-conformance: each runtime runs under its
	// `supervise`, a child subreaper that kills what the runtime leaves behind, daemons that
	// cleared their environment included (docs/host-driver.md, "Escaped daemons").
	supervisor string
	bounds     Bounds
	store      *Store
	emit       func(event map[string]any)

	cancelled  chan struct{}
	cancelOnce sync.Once
}

// Cancel asks the task to stop (the daemon's context ending); safe to call any time.
func (t *Turn) Cancel() { t.cancelOnce.Do(func() { close(t.cancelled) }) }

// attempt is what one runtime process produced.
type attempt struct {
	ready, timedOut, cancelled bool
	thinking                   bool // the last frame was a thinking delta (one thinking_start per block)
	result                     *Frame
	sessionID                  string // the first session id the runtime announced
	mismatch                   string // set when a resume came back as another session
	toolCalls, foreign         int
	diagnostic, readErr        string
	exitErr                    error
	stderr                     string
}

// Run is the whole task: prepare, one attempt, maybe the fresh-session retry, the outcome.
func (t *Turn) Run() Outcome {
	binary, err := dshBinary(t.env)
	if err != nil {
		return t.failBeforeSpawn("SPAWN_FAILED", err.Error(), "")
	}
	workdir, err := filepath.EvalSymlinks(t.req.Cwd)
	if err == nil {
		workdir, err = filepath.Abs(workdir)
	}
	if err != nil {
		message := fmt.Sprintf("workdir %s is not usable: %v", t.req.Cwd, err)
		return t.failBeforeSpawn("SPAWN_FAILED", message, "")
	}
	resume := t.store.Resumable(t.req.ConversationID, workdir)
	model, err := t.pickedModel()
	if err != nil {
		return t.failBeforeSpawn("INVALID_ROUTE", err.Error(), resume)
	}
	first := t.attempt(binary, workdir, model, resume)
	final, sent := first, resume
	if shouldRetryFresh(first, resume) {
		logf("resume of %s rejected; retrying once with a fresh session", resume)
		t.store.Forget(t.req.ConversationID)
		retry := t.attempt(binary, workdir, model, "")
		if (retry.result != nil && retry.result.Status == "completed") || retry.sessionID != "" {
			final, sent = retry, ""
		}
	}
	return t.conclude(final, sent, workdir)
}

// pickedModel: `model` as given, or `route` ("default": none; "provider/model" split at the
// first "/"); anything else fails before spawn, as dsh.go parseDshModelID does.
func (t *Turn) pickedModel() (*Model, error) {
	if t.req.Route == nil {
		return t.req.Model, nil
	}
	if *t.req.Route == "default" {
		return nil, nil
	}
	provider, id, found := strings.Cut(*t.req.Route, "/")
	if !found || provider == "" || id == "" {
		return nil, fmt.Errorf("dsh model must use the provider/model ID advertised by DSH, not %q", *t.req.Route)
	}
	return &Model{Provider: provider, ID: id}, nil
}

// attempt runs one runtime process through steps 1-5.
func (t *Turn) attempt(binary, workdir string, model *Model, resume string) (a attempt) {
	requestID := newTaskID()
	args := []string{binary, "--profile", t.profile, "--stdio"}
	if t.supervisor != "" {
		args = append([]string{t.supervisor, "supervise", "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = workdir
	cmd.Env = append(append([]string{}, t.env...),
		"MULTICA_DSH_SESSION_ROOT="+t.sessionRoot(), "DSH_TELEMETRY_DISABLED=1", RunTokenEnv+"="+requestID)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	// Our own pipes rather than StdoutPipe: cmd.Wait must not close stdout under the reader
	// (the runtime's exit and stdout's end are watched apart, as a descendant may hold stdout).
	stdout, stdoutWriter, err := os.Pipe()
	if err != nil {
		a.readErr = "start dsh: " + err.Error()
		return a
	}
	stderrPipe, stderrWriter, err := os.Pipe()
	if err != nil {
		stdout.Close()
		stdoutWriter.Close()
		a.readErr = "start dsh: " + err.Error()
		return a
	}
	cmd.Stdout, cmd.Stderr = stdoutWriter, stderrWriter
	err = cmd.Start()
	stdoutWriter.Close()
	stderrWriter.Close()
	if err != nil {
		stdout.Close()
		stderrPipe.Close()
		a.exitErr = err
		a.readErr = "start dsh: " + err.Error()
		return a
	}
	pgid := cmd.Process.Pid
	lines := readLines(stdout)
	stderr := tailOf(stderrPipe, 2048)
	child := &process{exited: make(chan struct{})}
	go func() { child.err = cmd.Wait(); close(child.exited) }()
	exited := child.exited
	// reap(wait): step 5, after giving a runtime that closed stdout `wait` to exit on its own.
	reap := func(wait time.Duration) attempt { return t.reap(a, pgid, child, lines, stderr, requestID, wait) }
	runDeadline := time.After(t.bounds.Run)

	// Step 2: the first ready, then execute.
	handshake := time.After(t.bounds.Handshake)
	for !a.ready {
		select {
		case line, open := <-lines:
			if !open {
				return reap(t.bounds.Drain)
			}
			t.handle(&a, line, requestID, resume, workdir)
		case <-handshake:
			a.readErr = fmt.Sprintf("dsh did not become ready within %s", t.bounds.Handshake)
			return reap(0)
		case <-t.cancelled:
			a.cancelled = true
			a.readErr = "dsh cancelled before the runtime protocol became ready"
			return reap(0)
		case <-runDeadline:
			a.timedOut = true
			return reap(0)
		}
	}
	command, _ := json.Marshal(executeCommand(requestID, workdir, t.prompt(resume), resume, model, t.req.Effort))
	if _, err := stdin.Write(append(command, '\n')); err != nil {
		a.readErr = "send dsh execute command: " + err.Error()
	}

	// Steps 3-4: frames until stdout ends and the runtime exits; a cancel, the run bound, or a
	// runtime that outlives its result starts the escalation.
	var escalation <-chan time.Time
	stage := 0
	escalate := func() {
		if stage == 0 {
			stage, escalation = 1, time.After(t.bounds.CancelGrace)
		}
	}
	cancelRequested := t.cancelled
	var drain <-chan time.Time
	reading := lines
	for reading != nil || exited != nil {
		select {
		case line, open := <-reading:
			if !open {
				reading = nil
				continue
			}
			hadResult := a.result != nil
			t.handle(&a, line, requestID, resume, workdir)
			if !hadResult && a.result != nil && stage == 0 {
				stage, escalation = 1, time.After(t.bounds.AfterResult)
			}
		case <-exited:
			exited, drain = nil, time.After(t.bounds.Drain)
		case <-drain:
			reading = nil // a descendant holds stdout: the runtime is gone, stop reading
		case <-cancelRequested:
			cancelRequested = nil
			a.cancelled = true
			cancel, _ := json.Marshal(map[string]any{"v": 1, "type": "cancel", "request_id": requestID})
			_, _ = stdin.Write(append(cancel, '\n'))
			escalate()
		case <-runDeadline:
			runDeadline = nil
			a.timedOut = true
			cancel, _ := json.Marshal(map[string]any{"v": 1, "type": "cancel", "request_id": requestID})
			_, _ = stdin.Write(append(cancel, '\n'))
			escalate()
		case <-escalation:
			if stage == 1 {
				_ = signalGroup(pgid, syscall.SIGTERM)
				stage, escalation = 2, time.After(t.bounds.TerminateGrace)
			} else {
				_ = signalGroup(pgid, syscall.SIGKILL)
				stage, escalation = 3, nil
			}
		}
	}
	stdin.Close()
	return reap(0)
}

// process is the runtime's exit, once `exited` is closed.
type process struct {
	exited chan struct{}
	err    error
}

// exitsWithin reports whether the runtime has exited or exits within `wait`. An exit already
// seen wins over a zero wait (a select between two ready cases picks at random).
func (p *process) exitsWithin(wait time.Duration) bool {
	select {
	case <-p.exited:
		return true
	default:
	}
	select {
	case <-p.exited:
		return true
	case <-time.After(wait):
		return false
	}
}

// reap is step 5: the runtime's group SIGKILLed (all of it once the runtime exited: nothing
// of a finished run may outlive it), escaped daemons by token, then stderr's tail and what
// stdout still holds (discarded).
func (t *Turn) reap(a attempt, pgid int, child *process, lines chan []byte, stderr func() string,
	token string, wait time.Duration) attempt {
	if !child.exitsWithin(wait) {
		_ = signalGroup(pgid, syscall.SIGKILL)
		<-child.exited
	}
	a.exitErr = child.err
	if !killGroup(pgid, t.bounds.TerminateGrace) {
		logf("process group %d could not be verified gone", pgid)
	}
	killByToken(token)
	go func() {
		for range lines {
		}
	}()
	a.stderr = stderr()
	return a
}

// handle is one stdout line (dsh.go reader): skipped unless it decodes, has v 1 and no other
// request's id; then its effect.
func (t *Turn) handle(a *attempt, line []byte, requestID, resume, workdir string) {
	frame, ok, blank := DecodeFrame(line)
	if !ok {
		if !blank {
			logf("skipped a runtime line that is not a frame")
		}
		return
	}
	if frame.V != 1 {
		a.diagnostic = fmt.Sprintf("dsh returned unsupported protocol version %d", frame.V)
		return
	}
	if frame.RequestID != "" && frame.RequestID != requestID {
		a.foreign++
		return
	}
	switch frame.Type {
	case "ready":
		a.ready = true
	case "session":
		if frame.SessionID != "" && a.sessionID == "" && (resume == "" || frame.SessionID == resume) {
			t.emit(map[string]any{"type": "status", "label": "running", "sessionId": frame.SessionID})
		}
		t.session(a, frame.SessionID, resume, workdir)
	case "thinking":
		if frame.Content != "" && !a.thinking {
			t.emit(map[string]any{"type": "thinking_start"})
		}
		for _, piece := range pieces(frame.Content) {
			t.emit(map[string]any{"type": "thinking_delta", "delta": piece})
		}
	case "text":
		for _, piece := range pieces(frame.Content) {
			t.emit(map[string]any{"type": "text_delta", "delta": piece})
		}
	case "tool_call":
		a.toolCalls++
		t.emit(map[string]any{"type": "tool_use", "id": frame.CallID, "name": frame.Name,
			"input": ToolInput(frame.Arguments)})
	case "tool_result":
		t.emit(map[string]any{"type": "tool_result", "toolUseId": frame.CallID, "content": frame.Output,
			"isError": frame.IsError})
	case "usage":
		negative := frame.InputTokens < 0 || frame.OutputTokens < 0 || frame.CacheRead < 0 || frame.CacheWrite < 0
		if negative {
			logf("usage frame with a negative token count not reported")
		}
		if (frame.Provider != "" || frame.Model != "") && !negative {
			t.emit(map[string]any{"type": "usage", "provider": frame.Provider, "model": frame.Model,
				"usage": map[string]any{"input_tokens": frame.InputTokens, "output_tokens": frame.OutputTokens,
					"cache_read_tokens": frame.CacheRead, "cache_write_tokens": frame.CacheWrite}})
		}
	case "protocol_error":
		a.diagnostic = frame.Code + ": " + frame.Message
	case "result":
		result := frame
		a.result = &result // the last result wins
		if frame.SessionID != "" {
			t.session(a, frame.SessionID, resume, workdir)
		}
	}
	a.thinking = frame.Type == "thinking"
}

// session pins the run's first session id at once (daemon.go PinTaskSession); a resume answered
// with another id is the run's failure and is never pinned.
func (t *Turn) session(a *attempt, sessionID, resume, workdir string) {
	if sessionID == "" {
		return
	}
	if resume != "" && sessionID != resume {
		a.mismatch = fmt.Sprintf("DSH resume changed session ID: asked for %s, got %s", resume, sessionID)
		return
	}
	if a.sessionID == "" {
		a.sessionID = sessionID
		t.store.Pin(t.req.ConversationID, workdir, sessionID)
	}
}

// maxDelta bounds one relayed delta, so a reply line stays under the driver protocol's 2 MiB
// even for a 32 MiB frame (a long delta becomes several).
const maxDelta = 1 << 20

// pieces splits a delta into parts of at most maxDelta bytes, at rune boundaries ("" gives none:
// Multica drops empty content).
func pieces(content string) []string {
	var parts []string
	for len(content) > maxDelta {
		cut := maxDelta
		for cut > 0 && !utf8.RuneStart(content[cut]) {
			cut--
		}
		parts, content = append(parts, content[:cut]), content[cut:]
	}
	if content != "" {
		parts = append(parts, content)
	}
	return parts
}

// shouldRetryFresh is daemon.go shouldRetryWithFreshSession: a failed result of a resume that
// ran no tool, rejected by the runtime.
func shouldRetryFresh(a attempt, resume string) bool {
	return resume != "" && a.result != nil && a.result.Status == "failed" && a.toolCalls == 0 &&
		a.mismatch == "" && a.result.ResumeRejected
}

// conclude is step 7.
func (t *Turn) conclude(a attempt, resume, workdir string) Outcome {
	var sessionID *string
	id := a.sessionID
	if a.result != nil && a.result.SessionID != "" && a.mismatch == "" {
		id = a.result.SessionID
	}
	if id != "" && a.mismatch == "" {
		sessionID = &id
	}
	out := Outcome{SessionID: sessionID, Resumed: resume != "" && id == resume && a.mismatch == "",
		ForeignFrames: a.foreign, Stderr: t.redact(a.stderr)}
	fail := func(code, text string) Outcome {
		if a.stderr != "" {
			text += "; dsh stderr: " + a.stderr
		}
		text = t.redact(text)
		out.Status, out.Code, out.Message = "failed", &code, &text
		t.emit(map[string]any{"type": "error", "message": text, "error": map[string]any{"code": code, "message": text}})
		return out
	}
	switch {
	case a.mismatch != "":
		return fail("RESUME_MISMATCH", a.mismatch)
	case a.result != nil && a.result.Status == "completed":
		out.Status = "completed"
		return out
	case a.result != nil && a.result.Status == "cancelled", a.result == nil && a.cancelled:
		out.Status = "cancelled"
		return out
	case a.result != nil:
		text := "dsh returned status " + a.result.Status
		if a.result.Error != nil {
			text = a.result.Error.Code + ": " + a.result.Error.Message
		}
		if a.result.ResumeRejected {
			t.store.Forget(t.req.ConversationID)
			return fail("RESUME_REJECTED", text)
		}
		return fail("RUN_FAILED", text)
	case a.timedOut:
		return fail("RUN_TIMEOUT", fmt.Sprintf("dsh timed out after %s", t.bounds.Run))
	case a.readErr != "" && !a.ready:
		return fail("READY_TIMEOUT", a.readErr)
	case a.readErr != "":
		return fail("MISSING_RESULT", a.readErr)
	case a.diagnostic != "":
		return fail("MISSING_RESULT", a.diagnostic)
	case a.exitErr != nil:
		return fail("MISSING_RESULT", "dsh exited with error: "+a.exitErr.Error())
	case !a.ready:
		return fail("MISSING_RESULT", "dsh exited before the runtime protocol became ready")
	default:
		return fail("MISSING_RESULT", "dsh exited without a terminal result")
	}
}

// failBeforeSpawn: the task fails with nothing started, the mapping (`mapped`) untouched.
func (t *Turn) failBeforeSpawn(code, message, mapped string) Outcome {
	t.emit(map[string]any{"type": "error", "message": message, "error": map[string]any{"code": code, "message": message}})
	var sessionID *string
	if mapped != "" {
		sessionID = &mapped
	}
	return Outcome{Status: "failed", SessionID: sessionID, Code: &code, Message: &message, Stderr: ""}
}

// prompt: a new session gets the cold prompt (the bootstrap context, then the turn), a resume
// the warm one (the turn only).
func (t *Turn) prompt(resume string) string {
	if resume == "" && t.req.Bootstrap != nil && *t.req.Bootstrap != "" {
		return *t.req.Bootstrap + "\n\n" + t.req.Prompt
	}
	return t.req.Prompt
}

// sessionRoot is MULTICA_DSH_SESSION_ROOT: <data dir>/dsh-sessions/<runtime id>/<agent id>.
func (t *Turn) sessionRoot() string {
	root := filepath.Join(envValue(t.env, "RUNTIME_DATA_DIR"), "dsh-sessions", "dsh", "go-host")
	if err := os.MkdirAll(root, 0o700); err != nil {
		logf("cannot make the session root %s: %v", root, err)
	}
	return root
}

// redact hides the prompt, the bootstrap and credential values in text the host reports.
func (t *Turn) redact(text string) string {
	secrets := []string{t.req.Prompt}
	if t.req.Bootstrap != nil {
		secrets = append(secrets, *t.req.Bootstrap)
	}
	for _, entry := range t.env {
		name, value, _ := strings.Cut(entry, "=")
		upper := strings.ToUpper(name)
		for _, marker := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"} {
			if strings.Contains(upper, marker) && len(value) >= 4 {
				secrets = append(secrets, value)
			}
		}
	}
	for _, secret := range secrets {
		if len(secret) >= 4 {
			text = strings.ReplaceAll(text, secret, "[redacted]")
		}
	}
	return text
}

// executeCommand is dsh.go dshExecuteCommand: no resume_session_id or model when empty,
// mcp_servers always present.
func executeCommand(requestID, cwd, prompt, resume string, model *Model, effort *string) map[string]any {
	command := map[string]any{"v": 1, "type": "execute", "request_id": requestID, "cwd": cwd,
		"prompt": prompt, "mcp_servers": []any{}}
	if resume != "" {
		command["resume_session_id"] = resume
	}
	if model != nil {
		command["model"] = map[string]string{"provider": model.Provider, "id": model.ID}
	}
	if effort != nil && *effort != "" {
		command["reasoning_effort"] = *effort
	}
	return command
}

// readLines delivers stdout lines (up to 32 MiB each, scanner.go) until EOF or a read error.
func readLines(stdout io.ReadCloser) chan []byte {
	lines := make(chan []byte, 64)
	go func() {
		defer close(lines)
		defer stdout.Close()
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(make([]byte, 64*1024), 32*1024*1024)
		for scanner.Scan() {
			lines <- append([]byte(nil), scanner.Bytes()...)
		}
		if err := scanner.Err(); err != nil {
			logf("read dsh event stream: %v", err)
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return lines
}

// tailOf drains a pipe, keeping its last `keep` bytes (stderr_tail.go); the returned function
// waits (bounded) for the pipe to end and gives the tail.
func tailOf(pipe io.ReadCloser, keep int) func() string {
	var mu sync.Mutex
	var tail []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pipe.Close()
		chunk := make([]byte, 4096)
		for {
			n, err := pipe.Read(chunk)
			mu.Lock()
			tail = append(tail, chunk[:n]...)
			if len(tail) > keep {
				tail = tail[len(tail)-keep:]
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return func() string {
		select {
		case <-done:
		case <-time.After(DefaultBounds.Drain):
		}
		mu.Lock()
		defer mu.Unlock()
		return strings.TrimSpace(string(tail))
	}
}

// newTaskID is a random UUID v4, as Multica's task ids are.
func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
