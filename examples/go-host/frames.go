package main

// The runtime's frames as Multica's daemon reads them (server/pkg/agent/dsh.go, reader): one
// typed struct, decoded with encoding/json. A line that does not decode into it (not JSON, an
// array, a member of the wrong JSON type) is skipped, never fatal; unknown members are ignored.

import (
	"bytes"
	"encoding/json"
)

// Frame holds every member Multica reads from any runtime frame.
type Frame struct {
	V              int             `json:"v"`
	Type           string          `json:"type"`
	RequestID      string          `json:"request_id"`
	Runtime        string          `json:"runtime"`
	SessionID      string          `json:"session_id"`
	Content        string          `json:"content"`
	CallID         string          `json:"call_id"`
	Name           string          `json:"name"`
	Arguments      string          `json:"arguments"`
	Output         string          `json:"output"`
	IsError        bool            `json:"is_error"`
	Provider       string          `json:"provider"`
	Model          string          `json:"model"`
	InputTokens    int64           `json:"input_tokens"`
	OutputTokens   int64           `json:"output_tokens"`
	CacheRead      int64           `json:"cache_read_tokens"`
	CacheWrite     int64           `json:"cache_write_tokens"`
	Phase          string          `json:"phase"`
	Message        string          `json:"message"`
	Data           map[string]any  `json:"data"`
	Code           string          `json:"code"`
	Status         string          `json:"status"`
	Error          *FrameError     `json:"error"`
	ResumeRejected bool            `json:"resume_rejected"`
	Acceptance     json.RawMessage `json:"acceptance"`
}

// FrameError is a result's or protocol_error's structured error.
type FrameError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// DecodeFrame reads one stdout line. ok is false for a blank line or one that does not decode
// into a Frame (the caller counts it as invalid only when the line was not blank).
func DecodeFrame(line []byte) (frame Frame, ok bool, blank bool) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return Frame{}, false, true
	}
	if err := json.Unmarshal(trimmed, &frame); err != nil {
		return Frame{}, false, false
	}
	return frame, true, false
}

// ToolInput is a tool_call's `arguments` as Multica turns it into a tool input: a JSON object
// as itself, "" as {}, anything else as {"raw": arguments}.
func ToolInput(arguments string) map[string]any {
	if arguments == "" {
		return map[string]any{}
	}
	var object map[string]any
	if err := json.Unmarshal([]byte(arguments), &object); err == nil && object != nil {
		return object
	}
	return map[string]any{"raw": arguments}
}

// ModelEntry is one item of a `--list-models` frame (dsh.go discoverDshModels).
type ModelEntry struct {
	ID       string `json:"id"`
	Label    string `json:"label"`
	Provider string `json:"provider"`
	Default  bool   `json:"default"`
	Thinking *struct {
		SupportedLevels []struct {
			Value string `json:"value"`
			Label string `json:"label"`
		} `json:"supported_levels"`
		DefaultLevel string `json:"default_level"`
	} `json:"thinking"`
}

// ModelsFrames collects the models of every `{"v":1,"type":"models"}` line; other lines are
// skipped.
func ModelsFrames(stdout []byte) []ModelEntry {
	var models []ModelEntry
	for _, line := range bytes.Split(stdout, []byte("\n")) {
		var frame struct {
			V      int          `json:"v"`
			Type   string       `json:"type"`
			Models []ModelEntry `json:"models"`
		}
		if json.Unmarshal(bytes.TrimSpace(line), &frame) == nil && frame.V == 1 && frame.Type == "models" {
			models = append(models, frame.Models...)
		}
	}
	return models
}

// ProbeAccepted is Multica's probe gate (agents_probe.go probeDshMulticaProfile): some line,
// split on "\n", decodes to v 1, type probe, runtime dsh, protocol_version 1.
func ProbeAccepted(stdout []byte, runtime string) bool {
	for _, line := range bytes.Split(stdout, []byte("\n")) {
		var probe struct {
			V               int    `json:"v"`
			Type            string `json:"type"`
			Runtime         string `json:"runtime"`
			ProtocolVersion int    `json:"protocol_version"`
		}
		if json.Unmarshal(bytes.TrimSpace(line), &probe) != nil {
			continue
		}
		if probe.V == 1 && probe.Type == "probe" && probe.Runtime == runtime && probe.ProtocolVersion == 1 {
			return true
		}
	}
	return false
}
