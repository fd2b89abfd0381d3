package main

// The conversation -> session mapping. Multica resumes the newest session of the same (agent,
// issue) only when the task reuses that task's workdir (daemon.go gateResumeToReusedWorkdir):
// the workdir is the whole compatibility key. Stored under RUNTIME_DATA_DIR, written to a temp
// file and renamed over the old one, so a crash never leaves half a file.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Mapping is what a conversation resumes from.
type Mapping struct {
	SessionID string `json:"session_id"`
	Workdir   string `json:"workdir"`
}

// Store is the mapping file, safe for concurrent runs.
type Store struct {
	mu   sync.Mutex
	path string
}

// NewStore keeps the mapping in dataDir (empty: in memory only, nothing persisted).
func NewStore(dataDir string) *Store {
	if dataDir == "" {
		return &Store{}
	}
	return &Store{path: filepath.Join(dataDir, "go-host-sessions.json")}
}

func (s *Store) load() map[string]Mapping {
	all := map[string]Mapping{}
	if s.path == "" {
		return all
	}
	if bytes, err := os.ReadFile(s.path); err == nil {
		if json.Unmarshal(bytes, &all) != nil {
			logf("session mapping %s is unreadable; starting from none", s.path)
			all = map[string]Mapping{}
		}
	}
	return all
}

func (s *Store) save(all map[string]Mapping) error {
	if s.path == "" {
		return nil
	}
	bytes, _ := json.MarshalIndent(all, "", "  ")
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	temp := fmt.Sprintf("%s.%d.tmp", s.path, os.Getpid())
	if err := os.WriteFile(temp, append(bytes, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(temp, s.path)
}

// Resumable is the session to resume for this conversation in this workdir, or "".
func (s *Store) Resumable(conversation, workdir string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if found, ok := s.load()[conversation]; ok && found.Workdir == workdir {
		return found.SessionID
	}
	return ""
}

// Pin maps the conversation to a session (Multica pins a run's first session id at once).
func (s *Store) Pin(conversation, workdir, sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.load()
	all[conversation] = Mapping{SessionID: sessionID, Workdir: workdir}
	if err := s.save(all); err != nil {
		logf("cannot store the session mapping: %v", err)
	}
}

// Forget drops the conversation's mapping (a resume the runtime rejected).
func (s *Store) Forget(conversation string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.load()
	delete(all, conversation)
	if err := s.save(all); err != nil {
		logf("cannot update the session mapping: %v", err)
	}
}
