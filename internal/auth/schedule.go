package auth

import (
	"time"

	"github.com/gatehousehq/gatehouse/graph"
)

// Schedule sets a newly raised interrupt's deadline and timers from the
// policy and the task's options (graph.WithRaiseHook): the deadline
// (options.deadlines replaces the policy's, on_timeout still the
// policy's), a reminder per offset that falls after the raise, a timer
// per escalation step.
func (p Policy) Schedule(task *graph.Task, itr *graph.Interrupt) {
	kp := p.Kind(itr.Kind)
	var override time.Duration
	if task != nil {
		if o, err := graph.ParseOptions(task.Options); err == nil {
			override = o.Deadlines[itr.Kind]
		}
	}
	raised := itr.CreatedAt
	if d := p.Deadline(itr.Kind, override); d > 0 {
		due := raised.Add(d)
		itr.Deadline = &due
		itr.Timers = append(itr.Timers, graph.Timer{What: graph.TimerDeadline, DueAt: due, Action: orNone(kp.OnTimeout)})
		for i, off := range kp.Reminders {
			if at := due.Add(-off); at.After(raised) {
				itr.Timers = append(itr.Timers, graph.Timer{What: graph.TimerReminder, Step: i + 1, DueAt: at, Offset: off})
			}
		}
	}
	for i, st := range kp.Escalate {
		itr.Timers = append(itr.Timers, graph.Timer{What: graph.TimerEscalate, Step: i + 1, DueAt: raised.Add(st.After)})
	}
}

// AddedNames is Added as strings ("group:leads").
func (p Policy) AddedNames(kind string, level int) []string { return refStrings(p.Added(kind, level)) }

func refStrings(rs []DeciderRef) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// WithGroups lets an audience built from bare references (Added) expand
// the policy's groups.
func (a Audience) WithGroups(p Policy) Audience {
	a.groups = p.groups
	return a
}
