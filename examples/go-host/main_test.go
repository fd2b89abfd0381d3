package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Every bad request gets an error reply naming what is wrong; none crashes the driver or passes.
func TestBadRequestsGetErrorReplies(t *testing.T) {
	var out bytes.Buffer
	driver := &Driver{out: &out, profile: "multica", store: NewStore(""), runs: map[string]*Turn{}}
	for request, want := range map[string]string{
		`not json`:                            "not a JSON object",
		`[1]`:                                 "not a JSON object",
		`{"v":2,"type":"discover","id":"d1"}`: "v must be 1",
		`{"v":1,"type":"discover"}`:           "needs a string id",
		`{"v":1,"type":"discover","id":7}`:    "needs a string id",
		`{"v":1,"type":"setup","id":"s1"}`:    "unsupported request type",
		`{"v":1,"type":"run","id":"r1"}`:      "run needs conversation_id",
		`{"v":1,"type":"run","id":"r1","conversation_id":"c","cwd":"/p","prompt":"x"}`: "model",
	} {
		out.Reset()
		if !driver.handle([]byte(request)) {
			t.Fatalf("%s stopped the driver", request)
		}
		var reply map[string]any
		if err := json.Unmarshal(out.Bytes(), &reply); err != nil {
			t.Fatalf("%s: the reply is not one JSON line: %q", request, out.String())
		}
		if reply["type"] != "error" || !strings.Contains(reply["message"].(string), want) {
			t.Errorf("%s: got %v, want an error about %q", request, reply, want)
		}
	}
	out.Reset()
	if driver.handle([]byte(`{"v":1,"type":"shutdown"}`)) || !strings.Contains(out.String(), `"bye"`) {
		t.Errorf("shutdown answers bye and stops the driver: %q", out.String())
	}
}
