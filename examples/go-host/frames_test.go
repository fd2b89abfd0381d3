package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeFrameSkipsWhatMulticaSkips(t *testing.T) {
	for _, line := range []string{
		`not json`, `[1,2]`, `"a string"`, `7`, "\ufeff{\"v\":1,\"type\":\"text\"}",
		`{"v":1,"type":"text","content":5}`, `{"v":"1","type":"text"}`,
		`{"v":1,"type":"tool_call","arguments":{"path":"a"}}`, `{"v":1} {"v":1}`,
		`{"v":1,"type":"usage","input_tokens":1.5}`,
	} {
		if _, ok, blank := DecodeFrame([]byte(line)); ok || blank {
			t.Errorf("%q decoded (ok %v, blank %v); Multica skips it as invalid", line, ok, blank)
		}
	}
	if _, ok, blank := DecodeFrame([]byte(" \t\r")); ok || !blank {
		t.Errorf("a blank line is skipped as blank, not counted")
	}
	frame, ok, _ := DecodeFrame([]byte("{\"v\":1,\"TYPE\":\"text\",\"content\":\"hi\",\"extra\":{}}\r"))
	if !ok || frame.Type != "text" || frame.Content != "hi" {
		t.Errorf("CRLF, unknown members and a case-folded name decode as Go does: %+v", frame)
	}
	frame, ok, _ = DecodeFrame([]byte(`{"v":1,"type":"result","status":"completed","output":"done",` +
		`"error":{"code":"X","message":"m"},"resume_rejected":true,"acceptance":{"passed":true}}`))
	if !ok || frame.Output != "done" || frame.Error.Code != "X" || !frame.ResumeRejected ||
		string(frame.Acceptance) != `{"passed":true}` {
		t.Errorf("a result keeps output, error, resume_rejected and acceptance: %+v", frame)
	}
}

func TestToolInputFollowsMultica(t *testing.T) {
	cases := map[string]map[string]any{
		``:                 {},
		`{"path":"a.txt"}`: {"path": "a.txt"},
		`[1]`:              {"raw": "[1]"},
		`not json`:         {"raw": "not json"},
		`null`:             {"raw": "null"},
	}
	for arguments, want := range cases {
		if got := ToolInput(arguments); !reflect.DeepEqual(got, want) {
			t.Errorf("ToolInput(%q) = %v, want %v", arguments, got, want)
		}
	}
}

func TestProbeAcceptedNeedsFourMembers(t *testing.T) {
	good := `{"v":1,"type":"probe","runtime":"dsh","protocol_version":1}`
	for stdout, want := range map[string]bool{
		good + "\n":                  true,
		"log line\n" + good + "\r\n": true,
		good:                         true,
		"\ufeff" + good + "\n":       false,
		`{"v":1,"type":"probe","runtime":"open-design","protocol_version":1}`: false,
		`{"v":2,"type":"probe","runtime":"dsh","protocol_version":2}`:         false,
		`{"v":1,"type":"probe","runtime":"dsh"}`:                              false,
		"":                                                                    false,
	} {
		if got := ProbeAccepted([]byte(stdout), "dsh"); got != want {
			t.Errorf("ProbeAccepted(%q) = %v, want %v", stdout, got, want)
		}
	}
}

func TestModelsBecomeThePickersCatalog(t *testing.T) {
	stdout := "noise\n" +
		`{"v":1,"type":"models","models":[{"id":"deepseek-official/deepseek-v4%2Fflash","label":"Flash",` +
		`"provider":"DeepSeek","default":true,"thinking":{"supported_levels":[{"value":"low","label":"Low"},` +
		`{"value":"high","label":"High"}],"default_level":"high"}},{"id":"unqualified","label":"X"}]}` + "\n" +
		`{"v":1,"type":"models","models":[{"id":"p/m","label":"M"}]}` + "\n"
	entries := ModelsFrames([]byte(stdout))
	if len(entries) != 3 {
		t.Fatalf("several models frames concatenate: %d entries", len(entries))
	}
	model, ok := catalogModel(entries[0])
	if !ok || model.Provider != "deepseek-official" || model.ID != "deepseek-v4/flash" || model.Name != "Flash" {
		t.Errorf("the id splits at the first / and unescapes each half: %+v", model)
	}
	options, _ := json.Marshal(model.ReasoningOptions)
	if string(options) != `[{"id":"low","name":"Low"},{"default":true,"id":"high","name":"High"}]` {
		t.Errorf("thinking levels become reasoning options: %s", options)
	}
	if _, ok := catalogModel(entries[1]); ok {
		t.Errorf("an id that is not provider/model is dropped")
	}
}

func TestExecuteOmitsWhatMulticaOmits(t *testing.T) {
	command := executeCommand("task", "/w", "p", "", nil, nil)
	for _, member := range []string{"resume_session_id", "model", "reasoning_effort"} {
		if _, present := command[member]; present {
			t.Errorf("%s is sent though empty", member)
		}
	}
	if servers, ok := command["mcp_servers"].([]any); !ok || len(servers) != 0 {
		t.Errorf("mcp_servers is always present, [] when none: %v", command["mcp_servers"])
	}
	effort := "high"
	command = executeCommand("task", "/w", "p", "s1", &Model{"prov", "m"}, &effort)
	if command["resume_session_id"] != "s1" || command["reasoning_effort"] != "high" ||
		!reflect.DeepEqual(command["model"], map[string]string{"provider": "prov", "id": "m"}) {
		t.Errorf("a resume, a model and an effort are sent as given: %v", command)
	}
}

func TestFreshRetryOnlyForARejectedResumeThatRanNoTool(t *testing.T) {
	rejected := &Frame{Status: "failed", ResumeRejected: true}
	if !shouldRetryFresh(attempt{result: rejected}, "s1") {
		t.Errorf("a rejected resume is retried fresh")
	}
	if shouldRetryFresh(attempt{result: rejected}, "") {
		t.Errorf("no retry without a resume")
	}
	if shouldRetryFresh(attempt{result: rejected, toolCalls: 1}, "s1") {
		t.Errorf("no retry once a tool ran")
	}
	if shouldRetryFresh(attempt{result: &Frame{Status: "failed"}}, "s1") {
		t.Errorf("no retry for a failure that is not a rejection")
	}
}

func TestLongDeltasAreSplitAtRuneBoundaries(t *testing.T) {
	if got := pieces(""); len(got) != 0 {
		t.Errorf("empty content gives no delta: %q", got)
	}
	long := strings.Repeat("é", maxDelta) // two bytes each
	parts := pieces(long)
	if strings.Join(parts, "") != long || len(parts) != 2 {
		t.Fatalf("%d parts do not rejoin into the content", len(parts))
	}
	for _, part := range parts {
		if len(part) > maxDelta || !utf8.ValidString(part) {
			t.Errorf("a part of %d bytes is too long or splits a rune", len(part))
		}
	}
}
