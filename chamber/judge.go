package chamber

import (
	"fmt"
	"strings"
	"time"

	"github.com/cryochamber/cryochamber/internal/program"
	"github.com/cryochamber/cryochamber/marker"
	"github.com/cryochamber/cryochamber/validate"
)

// verdict is what steps 1 to 3 conclude about a block's markers.
type verdict struct {
	next       *time.Time // when to wake (nil: the plan is complete)
	planWake   *time.Time // the plan's wake after this session (nil: none)
	warnings   []string   // for the next prompt
	nextReason Why
	cmdLine    string // the command of the next session ("" = the agent)
	task       string
	guard      *choice // what the guardrails did to next (guardrails.go)
}

// judge runs steps 1 to 3 on the markers of session n: are they valid, when is the next wake
// (WAKE, pending TODOs, waiting messages), and can the next command run. validAt is the end of
// the session: relative times count from it and late_grace is measured from it. why is what woke
// the session: a session woken before the plan's own wake that prints no WAKE keeps that wake.
func (r *runner) judge(rep *validate.Report, m *marker.Result, validAt time.Time, why Why) verdict {
	now := r.now()
	fillReport(rep, m)
	v := verdict{nextReason: WhyPlan, cmdLine: r.st.Command, task: r.st.Task}

	// Step 1: markers parsed. A FALLBACK to a target the operator did not allow is not an
	// error (nothing is sent there, and the chamber goes on), but it is loud: a warning here,
	// in the log, and in the next prompt.
	policy := r.fallbackPolicy(m)
	switch {
	case len(m.Errors) > 0:
		for _, e := range m.Errors {
			rep.Add(validate.StepMarkers, validate.Fail, "%v", e)
		}
	case m.Exit == nil:
		rep.Add(validate.StepMarkers, validate.Fail, "no EXIT marker: every session must end with [CRYO:EXIT <0|1|2>] <summary>")
	case len(policy) > 0:
		rep.Add(validate.StepMarkers, validate.Warn, "EXIT %d, %s; ignored: %s", m.Exit.Code, markerSummary(m), strings.Join(policy, "; "))
		v.warnings = policy
	default:
		rep.Add(validate.StepMarkers, validate.Pass, "EXIT %d, %s", m.Exit.Code, markerSummary(m))
	}
	step1Failed := len(m.Errors) > 0 || m.Exit == nil

	// Step 2: the wake time, and the TODOs' times.
	asap := func() *time.Time {
		t := now.Add(armLead).Truncate(time.Second).Add(time.Second)
		return &t
	}
	tooLate := validAt.Add(-r.cfg.LateGrace.D)
	var wakeDetail string
	var asked *time.Time // the WAKE as the agent asked for it, for the guardrails
	step2Failed := false
	switch {
	case m.Wake != nil:
		// Whole seconds, rounded up: WAKE, the state and the OS then agree exactly.
		w := ceilSecond(m.Wake.Time.Resolve(validAt).UTC())
		asked = &w
		rep.SetWake(w)
		switch {
		case w.Before(tooLate):
			step2Failed = true
			rep.Add(validate.StepWake, validate.Fail, "line %d: WAKE %s is %s before the session ended, more than late_grace (%s)",
				m.Wake.Line, w.Format(time.RFC3339), span(validAt.Sub(w)), fmtDur(r.cfg.LateGrace.D))
		case w.Before(now):
			v.next = asap()
			wakeDetail = fmt.Sprintf("WAKE %s is %s past (within late_grace %s): waking as soon as possible, at %s",
				w.Format(time.RFC3339), span(now.Sub(w)), fmtDur(r.cfg.LateGrace.D), v.next.Format(time.RFC3339))
		case w.Before(now.Add(armLead)):
			v.next = asap()
			wakeDetail = fmt.Sprintf("WAKE %s is closer than the %s arming lead: armed at %s",
				w.Format(time.RFC3339), armLead, v.next.Format(time.RFC3339))
		default:
			v.next = &w
			wakeDetail = fmt.Sprintf("WAKE %s (%s)", w.Format(time.RFC3339), Relative(w, now))
		}
	case why.early() && r.st.PlanWake != nil && r.st.PlanWake.After(now) && !step1Failed:
		// Woken early (a message, a TODO, a request) and no WAKE: answering a quick question
		// never ends the plan by omission. The plan's own wake stays.
		w := *r.st.PlanWake
		v.next = &w
		rep.SetWake(w)
		wakeDetail = fmt.Sprintf("no WAKE in a session woken early (%s): the plan's wake stays at %s (%s)", why, w.Format(time.RFC3339), Relative(w, now))
	}
	if v.next != nil {
		pw := *v.next
		v.planWake = &pw
	}
	for _, t := range m.Todos {
		at := ceilSecond(t.Time.Resolve(validAt).UTC())
		if at.Before(tooLate) {
			step2Failed = true
			rep.Add(validate.StepWake, validate.Fail, "line %d: TODO time %s is %s before the session ended, more than late_grace (%s)",
				t.Line, at.Format(time.RFC3339), span(validAt.Sub(at)), fmtDur(r.cfg.LateGrace.D))
			continue
		}
		if at.Before(now.Add(armLead)) {
			at = *asap()
		}
		if v.next == nil || at.Before(*v.next) {
			v.next, v.nextReason = &at, WhyTodo
		}
	}
	if t, w := r.pendingWake(now); t != nil && (v.next == nil || t.Before(*v.next)) {
		v.next, v.nextReason = t, w
	}
	switch {
	case step2Failed:
	case step1Failed:
		// Nothing can be concluded from markers that did not parse: never "plan complete".
		rep.Add(validate.StepWake, validate.Skip, "the markers are not valid (step 1)")
	case v.next == nil:
		rep.PlanComplete = true
		rep.Add(validate.StepWake, validate.Skip, "no WAKE and no pending TODO: the plan is complete")
	case v.nextReason == WhyPlan:
		rep.Add(validate.StepWake, validate.Pass, "%s", wakeDetail)
	default:
		rep.Add(validate.StepWake, validate.Pass, "next wake %s for a %s (%s)", v.next.Format(time.RFC3339), v.nextReason, Relative(*v.next, now))
	}
	if !step1Failed && !step2Failed {
		r.guardChoice(rep, &v, asked, validAt) // guardrails.go
	}

	// Step 3: the command of the next session: allowed, resolvable on the PATH the timer will
	// use, and (inside the chamber) the program the operator accepted.
	var cmd Command
	var err error
	if m.Cmd != nil {
		v.cmdLine = m.Cmd.Raw
		cmd, err = r.cfg.ResolveCMD(m.Cmd.Raw, m.Cmd.Args, r.agentLine())
	} else {
		cmd, err = r.command()
	}
	switch {
	case err != nil:
		rep.Add(validate.StepCommand, validate.Fail, "%v", err)
	case rep.PlanComplete && m.Cmd == nil:
		rep.Add(validate.StepCommand, validate.Skip, "plan complete: no next command")
	default:
		p, err := program.Look(cmd.Program(), r.dir, r.capturedPath())
		if err == nil {
			err = r.checkPinned(p, cmd)
		}
		if err != nil {
			rep.Add(validate.StepCommand, validate.Fail, "%v", err)
		} else {
			rep.Add(validate.StepCommand, validate.Pass, "%s → %s", cmdLineOrAgent(v.cmdLine), p)
			if m.Cmd != nil {
				v.task = cmd.Task
			}
		}
	}
	return v
}

func fillReport(rep *validate.Report, m *marker.Result) {
	if m.Exit != nil {
		rep.Exit = &validate.ExitInfo{Code: m.Exit.Code, Summary: m.Exit.Summary}
	}
	if m.Cmd != nil {
		s := m.Cmd.Raw
		rep.Cmd = &s
	}
	for _, p := range m.Plans {
		rep.Plans = append(rep.Plans, p.Text)
	}
	for _, f := range m.Fallbacks {
		rep.Fallbacks = append(rep.Fallbacks, validate.FallbackInfo{Action: f.Action, Target: f.Target, Message: f.Message})
	}
	for _, w := range m.Warnings {
		rep.Warnings = append(rep.Warnings, w.Error())
	}
}

func markerSummary(m *marker.Result) string {
	var parts []string
	if m.Wake != nil {
		parts = append(parts, "WAKE "+m.Wake.Time.Raw)
	} else {
		parts = append(parts, "no WAKE")
	}
	if m.Cmd != nil {
		parts = append(parts, "CMD "+m.Cmd.Raw)
	}
	for _, c := range []struct {
		n    int
		what string
	}{{len(m.Plans), "PLAN"}, {len(m.Fallbacks), "FALLBACK"}, {len(m.Replies), "REPLY"}, {len(m.Todos), "TODO"}, {len(m.Warnings), "warning(s)"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

func exitSummary(m *marker.Result) string {
	if m == nil || m.Exit == nil {
		return ""
	}
	return m.Exit.Summary
}

func cmdLineOrAgent(line string) string {
	if line == "" {
		return "(the agent)"
	}
	return line
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}
