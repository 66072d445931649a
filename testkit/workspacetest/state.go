package workspacetest

import (
	"encoding/json"
	"fmt"
	"io"
)

// savedSession is a session as SaveSessions writes it.
type savedSession struct {
	UUID     string   `json:"uuid"`
	Agent    string   `json:"agent"`
	Turns    int      `json:"turns"`
	Messages []string `json:"messages"`
}

// SaveSessions writes the live sessions and their histories as JSON, so that
// a later fake (flowbridge dev -store) can continue the conversations.
func (s *Server) SaveSessions(w io.Writer) error {
	s.mu.Lock()
	out := make([]savedSession, 0, len(s.sessions))
	for id, ss := range s.sessions {
		out = append(out, savedSession{UUID: id, Agent: ss.agent, Turns: ss.turns, Messages: ss.messages})
	}
	s.mu.Unlock()
	return json.NewEncoder(w).Encode(out)
}

// LoadSessions adds the sessions SaveSessions wrote. Sessions of agents the
// fake does not know yet are kept and belong to them once added.
func (s *Server) LoadSessions(r io.Reader) error {
	var in []savedSession
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range in {
		if ss.UUID == "" {
			continue
		}
		s.sessions[ss.UUID] = &session{agent: ss.Agent, turns: ss.Turns, messages: ss.Messages}
		if a, ok := s.agents[ss.Agent]; ok {
			a.sessions = append(a.sessions, ss.UUID)
		} else {
			s.agents[ss.Agent] = &agentState{Agent: Agent{UUID: ss.Agent}, sessions: []string{ss.UUID}}
		}
	}
	return nil
}
