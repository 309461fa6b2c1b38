package command_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/command"
	"github.com/agentbus/agentbus/domain"
)

// payloads holds one value of every struct type the package declares: the
// data of commands and the results they answer.
var payloads = map[string]any{
	"Command":                command.Command{},
	"Result":                 command.Result{},
	"Error":                  command.Error{},
	"AgentTaskData":          command.AgentTaskData{},
	"AgentTaskResult":        command.AgentTaskResult{},
	"HandOffData":            command.HandOffData{},
	"HandOffResult":          command.HandOffResult{},
	"CreateChainData":        command.CreateChainData{},
	"InitiateHandoffData":    command.InitiateHandoffData{},
	"AttachSessionData":      command.AttachSessionData{},
	"EnqueueData":            command.EnqueueData{},
	"MessageData":            command.MessageData{},
	"QueueState":             command.QueueState{},
	"LogDecisionData":        command.LogDecisionData{},
	"LogChunkResult":         command.LogChunkResult{},
	"StartSessionData":       command.StartSessionData{},
	"SkillConsolidation":     command.SkillConsolidation{},
	"StartSessionResult":     command.StartSessionResult{},
	"AckData":                command.AckData{},
	"CancelData":             command.CancelData{},
	"ReasonData":             command.ReasonData{},
	"RetryData":              command.RetryData{},
	"AnswerData":             command.AnswerData{},
	"FeedbackData":           command.FeedbackData{},
	"SkillData":              command.SkillData{},
	"BudgetData":             command.BudgetData{},
	"PermissionDecisionData": command.PermissionDecisionData{},
	"OutputData":             command.OutputData{},
	"UsageData":              command.UsageData{},
	"QuestionData":           command.QuestionData{},
	"PlanData":               command.PlanData{},
	"TaskListData":           command.TaskListData{},
	"HandoffData":            command.HandoffData{},
	"FailureData":            command.FailureData{},
	"PermissionRequestData":  command.PermissionRequestData{},
	"MetricsData":            command.MetricsData{},
	"AllocateResult":         command.AllocateResult{},
	"IssueSidecarKeyData":    command.IssueSidecarKeyData{},
	"RewindData":             command.RewindData{Turn: 2},
	"IssueSidecarKeyResult":  command.IssueSidecarKeyResult{},
	"ToolDefinition":         command.ToolDefinition{},
	"SubAgentDefinition":     command.SubAgentDefinition{},
	"CreateSkillData":        command.CreateSkillData{},
	"UpdateSkillData":        command.UpdateSkillData{},
	"RecordMemoryPillData":   command.RecordMemoryPillData{},
	"PillData":               command.PillData{},
	"ConsolidateSkillData":   command.ConsolidateSkillData{},
	"MemoryPillResult":       command.MemoryPillResult{},
	"CreateTemplateData":     command.CreateTemplateData{},
	"UpdateTemplateData":     command.UpdateTemplateData{},
	"RuleData":               command.RuleData{},
	"RuleIDData":             command.RuleIDData{},
	"ToolNameData":           command.ToolNameData{},
}

// decls returns the declarations of tok (types or constants) of the
// package's source.
func decls(t *testing.T, tok token.Token) []*ast.GenDecl {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	var out []*ast.GenDecl
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == tok {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// declared lists the struct types the package's source declares (aliases
// of domain snapshots excluded: their own tests cover them).
func declared(t *testing.T) []string {
	var names []string
	for _, g := range decls(t, token.TYPE) {
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			if _, isStruct := ts.Type.(*ast.StructType); isStruct && ts.Name.IsExported() && !ts.Assign.IsValid() {
				names = append(names, ts.Name.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

func TestEveryTypeIsCovered(t *testing.T) {
	for _, name := range declared(t) {
		if name == "Client" {
			continue // the sender, not a message
		}
		assert.Contains(t, payloads, name, "add %s to payloads", name)
	}
}

// Every type survives JSON with every field set: nothing is lost, renamed
// on the way back, or left out of the encoding.
func TestEveryTypeRoundTrips(t *testing.T) {
	for name, zero := range payloads {
		t.Run(name, func(t *testing.T) {
			typ := reflect.TypeOf(zero)
			full := reflect.New(typ)
			fill(t, full.Elem(), name)
			raw, err := json.Marshal(full.Interface())
			require.NoError(t, err)
			back := reflect.New(typ)
			require.NoError(t, json.Unmarshal(raw, back.Interface()), "%s", raw)
			assert.Equal(t, full.Elem().Interface(), back.Elem().Interface(), "%s", raw)
			for i := 0; i < typ.NumField(); i++ {
				if f := typ.Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
					assert.False(t, back.Elem().Field(i).IsZero(), "%s.%s is lost: %s", name, f.Name, raw)
				}
			}
		})
	}
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
	uuidType     = reflect.TypeOf(uuid.UUID{})
	rawType      = reflect.TypeOf(json.RawMessage(nil))
	usdType      = reflect.TypeOf(domain.USD(0))
)

// fill sets every field of v to a value that is not its zero and that its
// type accepts, derived from path so that fields differ.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	seed := len(path)
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seed) * time.Second)))
		return
	case v.Type() == uuidType:
		v.Set(reflect.ValueOf(uuid.NewSHA1(uuid.NameSpaceOID, []byte(path))))
		return
	case v.Type() == rawType:
		v.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"at":%q}`, path))))
		return
	case v.Type() == usdType:
		v.Set(reflect.ValueOf(domain.USD(1_250_000 + seed)))
		return
	case v.Type() == durationType:
		v.SetInt(int64(seed) * int64(time.Second))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(seed) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), path+"[0]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		key := reflect.New(v.Type().Key()).Elem()
		fill(t, key, path+".key")
		val := reflect.New(v.Type().Elem()).Elem()
		fill(t, val, path+".value")
		m.SetMapIndex(key, val)
		v.Set(m)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf(path))
	default:
		t.Fatalf("%s: cannot fill a %s", path, v.Type())
	}
}

func TestNewBuildsACommand(t *testing.T) {
	id := uuid.New()
	before := time.Now().UTC()
	c, err := command.New(domain.AggregateSession, command.PauseSession, id, "owner-1", command.ReasonData{Reason: "why"})
	require.NoError(t, err)
	assert.NotEqual(t, uuid.Nil, c.ID)
	assert.Equal(t, domain.AggregateSession, c.Aggregate)
	assert.Equal(t, command.PauseSession, c.Name)
	assert.Equal(t, id, c.AggregateID)
	assert.Equal(t, "owner-1", c.OwnerID)
	assert.False(t, c.IssuedAt.Before(before))
	assert.JSONEq(t, `{"reason":"why"}`, string(c.Data))
	assert.Equal(t, "agents.cmd.session.pause_session", c.Subject())

	other, err := command.New(domain.AggregateSession, command.PauseSession, id, "owner-1", nil)
	require.NoError(t, err)
	assert.NotEqual(t, c.ID, other.ID, "every command has its own id")

	_, err = command.New(domain.AggregateSession, command.PauseSession, id, "", func() {})
	assert.ErrorContains(t, err, "encode pause_session")
}

func TestResultErrors(t *testing.T) {
	assert.NoError(t, command.Result{}.Err())
	refused := command.Result{Error: &command.Error{Kind: command.KindConflict, Message: "session is Paused"}}
	err := refused.Err()
	require.Error(t, err)
	assert.Equal(t, "conflict: session is Paused", err.Error())
	e, ok := command.AsError(fmt.Errorf("send: %w", err))
	require.True(t, ok)
	assert.Equal(t, refused.Error, e)
	_, ok = command.AsError(errors.New("plain"))
	assert.False(t, ok)
}

func TestErrorKindsAreTheDomainKinds(t *testing.T) {
	assert.Equal(t, domain.KindValidation, command.KindValidation)
	assert.Equal(t, domain.KindConflict, command.KindConflict)
	assert.Equal(t, domain.KindNotFound, command.KindNotFound)
	assert.Equal(t, domain.KindUnauthorized, command.KindUnauthorized)
	assert.Equal(t, domain.KindForbidden, command.KindForbidden)
	assert.Equal(t, domain.KindInternal, command.KindInternal)
}

func TestChainIDForIsStable(t *testing.T) {
	first := uuid.MustParse("0b6f3c52-8f5e-4d6a-9a43-1f0e2d9b7c10")
	assert.Equal(t, command.ChainIDFor(first), command.ChainIDFor(first))
	assert.NotEqual(t, command.ChainIDFor(first), command.ChainIDFor(uuid.New()))
	assert.NotEqual(t, first, command.ChainIDFor(first))
}

// Command names are the last token of a subject: snake_case, and one
// meaning each.
func TestCommandNamesAreSubjectTokens(t *testing.T) {
	subjectToken := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	seen := map[string]string{}
	for _, g := range decls(t, token.CONST) {
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || n.Name == "ReplyHeader" || strings.HasPrefix(n.Name, "TaskPriority") {
					continue
				}
				v := strings.Trim(lit.Value, "\"")
				assert.Regexp(t, subjectToken, v, n.Name)
				if other, dup := seen[v]; dup {
					t.Errorf("%s and %s are both %q", other, n.Name, v)
				}
				seen[v] = n.Name
			}
		}
	}
	assert.Contains(t, seen, command.PauseSession)
}
