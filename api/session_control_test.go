package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// controlCase is one session command endpoint: a session it succeeds on,
// one whose status forbids it (409), and, where it takes input, a body it
// refuses (422).
type controlCase struct {
	name   string
	method string
	// path follows /api/agents/sessions/{id}/.
	path string
	body any
	// ok returns a session the command succeeds on.
	ok func(st *stack, t testing.TB, u user) SessionDetail
	// want checks the new state the endpoint answered.
	want func(t *testing.T, s SessionDetail)
	// forbidden returns a session whose status forbids the command, and
	// that status.
	forbidden func(st *stack, t testing.TB, u user) (SessionDetail, string)
	// invalid is a body the endpoint refuses with 422 at field.
	invalid any
	field   string
}

func status(want string) func(*testing.T, SessionDetail) {
	return func(t *testing.T, s SessionDetail) { assert.Equal(t, want, s.Status) }
}

func queuedSession(st *stack, t testing.TB, u user) (SessionDetail, string) {
	s, _ := st.start(t, u, nil)
	return s, "Queued"
}

func runningSession(st *stack, t testing.TB, u user) (SessionDetail, string) {
	s, _ := st.running(t, u, nil)
	return s, "Running"
}

func cancelledSession(st *stack, t testing.TB, u user) (SessionDetail, string) {
	s, _ := st.start(t, u, nil)
	require.Equal(t, http.StatusOK, st.call(t, http.MethodPost, "/api/agents/sessions/"+s.ID.String()+"/cancel", nil, u.auth).Code)
	return s, "Cancelled"
}

func running(st *stack, t testing.TB, u user) SessionDetail { s, _ := st.running(t, u, nil); return s }

// skillName is the skill the skill cases enable and disable.
const skillName = "retries"

var controlCases = []controlCase{
	{name: "interrupt", path: "interrupt", ok: running, want: status("Interrupting"), forbidden: queuedSession},
	{name: "pause", path: "pause", ok: running, want: status("Pausing"), forbidden: queuedSession},
	{name: "resume", path: "resume", ok: (*stack).paused, want: status("Resuming"), forbidden: runningSession},
	{name: "cancel", path: "cancel", ok: running, want: status("Cancelling"), forbidden: cancelledSession},
	{name: "approve", path: "approve", ok: (*stack).inReview,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Completed", s.Status)
			assert.False(t, s.HasPendingReview)
		},
		forbidden: func(st *stack, t testing.TB, u user) (SessionDetail, string) { return st.idle(t, u, nil), "Idle" }},
	{name: "reject", path: "reject", body: map[string]any{"reason": "the tests fail"}, ok: (*stack).inReview,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Failed", s.Status)
			require.NotNil(t, s.Failure)
			assert.Equal(t, Failure{Reason: "VerificationFailed", Message: "the tests fail"}, *s.Failure)
		},
		forbidden: runningSession, invalid: map[string]any{"reason": strings.Repeat("x", 4001)}, field: "body.reason"},
	{name: "close", path: "close", ok: func(st *stack, t testing.TB, u user) SessionDetail { return st.idle(t, u, nil) },
		want:      status("Completed"),
		forbidden: func(st *stack, t testing.TB, u user) (SessionDetail, string) { return st.inReview(t, u), "Idle" }},
	{name: "retry", path: "retry", body: map[string]any{"additionalInstruction": "run the linter"}, ok: (*stack).failed,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Queued", s.Status)
			assert.Equal(t, 1, s.RetryCount)
			assert.Equal(t, "run the linter", s.RetryInstruction)
		},
		forbidden: runningSession, invalid: map[string]any{"additionalInstruction": strings.Repeat("x", 2001)}, field: "body.additionalInstruction"},
	{name: "reload", path: "reload", ok: func(st *stack, t testing.TB, u user) SessionDetail { return st.idle(t, u, nil) },
		want:      func(t *testing.T, s SessionDetail) { assert.True(t, s.ReloadPending) },
		forbidden: runningSession},
	{name: "answer", path: "answer", body: map[string]any{"answer": "Yes"}, ok: (*stack).waitingForInput,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Running", s.Status)
			assert.Nil(t, s.PendingQuestion)
		},
		forbidden: runningSession, invalid: map[string]any{"answer": ""}, field: "body.answer"},
	{name: "approve plan", path: "plan/approve", ok: (*stack).waitingForPlan,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Running", s.Status)
			require.NotNil(t, s.Plan)
			assert.Equal(t, "Approved", s.Plan.Status)
		},
		forbidden: runningSession},
	{name: "reject plan", path: "plan/reject", body: map[string]any{"feedback": "keep the API"}, ok: (*stack).waitingForPlan,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Running", s.Status)
			require.NotNil(t, s.Plan)
			assert.Equal(t, "Rejected", s.Plan.Status)
			assert.Equal(t, "keep the API", s.Plan.Feedback)
		},
		forbidden: runningSession, invalid: map[string]any{"feedback": ""}, field: "body.feedback"},
	{name: "raise budget", path: "budget", body: map[string]any{"hardCapUsd": 25.5}, ok: running,
		want:      func(t *testing.T, s SessionDetail) { assert.Equal(t, 25.5, s.Budget.HardCapUsd) },
		forbidden: cancelledSession, invalid: map[string]any{"hardCapUsd": 5}, field: "body.hardCapUsd"},
	{name: "raise budget to nothing", path: "budget", body: map[string]any{"hardCapUsd": 25}, ok: running,
		want: status("Running"), forbidden: cancelledSession, invalid: map[string]any{"hardCapUsd": 0}, field: "body.hardCapUsd"},
	{name: "disable skill", method: http.MethodDelete, path: "skills/{skill}",
		ok: func(st *stack, t testing.TB, u user) SessionDetail {
			return st.idle(t, u, map[string]any{"skillIds": []string{u.skill.String()}})
		},
		want: func(t *testing.T, s SessionDetail) { assert.Empty(t, s.EnabledSkillIDs) },
		forbidden: func(st *stack, t testing.TB, u user) (SessionDetail, string) {
			s, _ := st.running(t, u, map[string]any{"skillIds": []string{u.skill.String()}})
			return s, "Running"
		}},
	{name: "enable skill", path: "skills/{skill}/enable",
		ok:   func(st *stack, t testing.TB, u user) SessionDetail { return st.idle(t, u, nil) },
		want: func(t *testing.T, s SessionDetail) { assert.Len(t, s.EnabledSkillIDs, 1) },
		forbidden: func(st *stack, t testing.TB, u user) (SessionDetail, string) {
			return st.idle(t, u, map[string]any{"skillIds": []string{u.skill.String()}}), "Idle"
		}},
	{name: "allow tool use", path: "permissions/toolu_1/allow", ok: (*stack).waitingForPermission,
		want: func(t *testing.T, s SessionDetail) {
			assert.Equal(t, "Running", s.Status)
			assert.Nil(t, s.PendingPermission)
		},
		forbidden: runningSession, invalid: map[string]any{"message": strings.Repeat("x", 2001)}, field: "body.message"},
	{name: "deny tool use", path: "permissions/toolu_1/deny", body: map[string]any{"message": "use /tmp"}, ok: (*stack).waitingForPermission,
		want: status("Running"), forbidden: runningSession},
	{name: "deny another tool use", path: "permissions/toolu_2/deny", ok: running, want: status("Running"),
		forbidden: func(st *stack, t testing.TB, u user) (SessionDetail, string) {
			return st.waitingForPermission(t, u), "WaitingForApproval"
		}},
}

func TestSessionCommands(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	for _, tc := range controlCases {
		method := tc.method
		if method == "" {
			method = http.MethodPost
		}
		t.Run(tc.name, func(t *testing.T) {
			// A user per case: each owner's pool has 20 slots.
			alice := newUser(t)
			alice.skill = st.skill(t, alice, skillName)
			url := func(id uuid.UUID) string {
				return "/api/agents/sessions/" + id.String() + "/" + strings.ReplaceAll(tc.path, "{skill}", alice.skill.String())
			}
			if tc.name != "deny another tool use" {
				s := tc.ok(st, t, alice)
				resp := st.call(t, method, url(s.ID), tc.body, alice.auth)
				require.Equal(t, http.StatusOK, resp.Code, resp.String())
				got := decode[SessionDetail](t, resp)
				assert.Equal(t, s.ID, got.ID)
				tc.want(t, got)
				stored := st.session(t, alice, s.ID)
				assert.Equal(t, got, stored, "the answer is the new state, version included")
			}

			s, current := tc.forbidden(st, t, alice)
			resp := st.call(t, method, url(s.ID), tc.body, alice.auth)
			require.Equal(t, http.StatusConflict, resp.Code, resp.String())
			p := resp.problem(t)
			assert.Equal(t, "conflict", p["kind"])
			assert.Equal(t, current, p["currentStatus"])

			if tc.invalid != nil {
				s := tc.ok(st, t, alice)
				resp := st.call(t, method, url(s.ID), tc.invalid, alice.auth)
				require.Equal(t, http.StatusUnprocessableEntity, resp.Code, resp.String())
				assert.Equal(t, tc.field, resp.problem(t)["errors"].([]any)[0].(map[string]any)["location"])
			}

			resp = st.call(t, method, url(uuid.New()), tc.body, alice.auth)
			require.Equal(t, http.StatusNotFound, resp.Code, resp.String())
			assert.Equal(t, "not_found", resp.problem(t)["kind"])

			resp = st.call(t, method, strings.Replace(url(uuid.New()), "/sessions/", "/sessions/x", 1), tc.body, alice.auth)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Code, resp.String())

			resp = st.call(t, method, url(s.ID), tc.body)
			require.Equal(t, http.StatusUnauthorized, resp.Code, resp.String())
		})
	}

	t.Run("permissions list", func(t *testing.T) {
		alice := newUser(t)
		s := st.waitingForPermission(t, alice)
		resp := st.call(t, http.MethodGet, "/api/agents/sessions/"+s.ID.String()+"/permissions", nil, alice.auth)
		require.Equal(t, http.StatusOK, resp.Code, resp.String())
		p := decode[PendingPermissions](t, resp)
		require.Len(t, p.Items, 1)
		assert.Equal(t, "toolu_1", p.Items[0].RequestID)
		assert.Equal(t, "Bash", p.Items[0].ToolName)
		r, _ := st.running(t, alice, nil)
		assert.JSONEq(t, `{"sessionId":"`+r.ID.String()+`","items":[]}`,
			st.call(t, http.MethodGet, "/api/agents/sessions/"+r.ID.String()+"/permissions", nil, alice.auth).String())
	})

	t.Run("skills that are not the session owner's", func(t *testing.T) {
		alice, bob := newUser(t), newUser(t)
		mine, theirs := st.skill(t, alice, skillName), st.skill(t, bob, skillName)
		idle := st.idle(t, alice, nil)
		path := func(skill uuid.UUID) string {
			return "/api/agents/sessions/" + idle.ID.String() + "/skills/" + skill.String() + "/enable"
		}
		for name, skill := range map[string]uuid.UUID{"unknown": uuid.New(), "another owner's": theirs} {
			resp := st.call(t, http.MethodPost, path(skill), nil, alice.auth)
			require.Equal(t, http.StatusNotFound, resp.Code, "%s: %s", name, resp.String())
		}
		require.Equal(t, http.StatusOK, st.call(t, http.MethodPost, path(mine), nil, alice.auth).Code)
		again := st.call(t, http.MethodPost, path(mine), nil, alice.auth)
		require.Equal(t, http.StatusConflict, again.Code, "already enabled: %s", again.String())
		off := st.call(t, http.MethodDelete, "/api/agents/sessions/"+idle.ID.String()+"/skills/"+theirs.String(), nil, alice.auth)
		require.Equal(t, http.StatusConflict, off.Code, "not enabled: %s", off.String())
		bad := st.call(t, http.MethodPost, "/api/agents/sessions/"+idle.ID.String()+"/skills/x/enable", nil, alice.auth)
		require.Equal(t, http.StatusUnprocessableEntity, bad.Code, bad.String())
	})
}

// TestIdempotentCommands: a repeat with the same Idempotency-Key returns
// the first response and changes nothing.
func TestIdempotentCommands(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{}, true)
	alice := newUser(t)
	s, _ := st.running(t, alice, nil)
	path := "/api/agents/sessions/" + s.ID.String() + "/pause"
	key := "Idempotency-Key: " + uuid.NewString()

	first := st.call(t, http.MethodPost, path, nil, alice.auth, key)
	require.Equal(t, http.StatusOK, first.Code, first.String())
	again := st.call(t, http.MethodPost, path, nil, alice.auth, key)
	require.Equal(t, http.StatusOK, again.Code, "a second pause would be a 409: %s", again.String())
	assert.Equal(t, first.String(), again.String())
	assert.Equal(t, "true", again.Header.Get(IdempotentReplayedHeader))
	assert.Equal(t, decode[SessionDetail](t, first).Version, st.session(t, alice, s.ID).Version, "nothing changed after the first pause")

	other := st.call(t, http.MethodPost, path, nil, alice.auth, "Idempotency-Key: "+uuid.NewString())
	require.Equal(t, http.StatusConflict, other.Code, "another key is another command")

	q := "/api/agents/sessions/" + s.ID.String() + "/messages/queue"
	e1 := st.call(t, http.MethodPost, q, map[string]any{"content": "hi"}, alice.auth, key)
	e2 := st.call(t, http.MethodPost, q, map[string]any{"content": "hi"}, alice.auth, key)
	require.Equal(t, http.StatusCreated, e1.Code, e1.String())
	assert.Equal(t, e1.String(), e2.String())
	assert.Len(t, decode[MessageQueue](t, st.call(t, http.MethodGet, q, nil, alice.auth)).Messages, 1, "enqueued once")
}

// TestCommandTimeout: when the worker does not answer in time the API
// says so (504), the command is kept, and a repeat with the same key gets
// its result once the worker runs.
func TestCommandTimeout(t *testing.T) {
	t.Parallel()
	st := newStack(t, Config{CommandTimeout: 300 * time.Millisecond}, false)
	alice := newUser(t)
	key := "Idempotency-Key: " + uuid.NewString()

	resp := st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), alice.auth, key)
	require.Equal(t, http.StatusGatewayTimeout, resp.Code, resp.String())
	assert.Contains(t, resp.problem(t)["detail"], "Idempotency-Key")

	st.startWorker(t)
	// The client repeats until the worker, now running, has handled it.
	for range 30 {
		resp = st.call(t, http.MethodPost, "/api/agents/sessions", startBody(), alice.auth, key)
		if resp.Code != http.StatusGatewayTimeout {
			break
		}
	}
	require.Equal(t, http.StatusCreated, resp.Code, resp.String())
	s := decode[StartSessionResponse](t, resp).Session
	assert.Equal(t, "Queued", s.Status)
	list := decode[SessionList](t, st.call(t, http.MethodGet, "/api/agents/sessions", nil, alice.auth))
	assert.Equal(t, 1, list.Total, "one session, started once")
}
