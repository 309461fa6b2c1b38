package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentbus/agentbus/domain"
)

func TestTemplateSandboxLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		limits domain.SandboxLimits
		field  string
	}{
		{"none keeps the deployment's", domain.SandboxLimits{}, ""},
		{"both set", domain.SandboxLimits{MaxProcesses: 64, MaxMemoryMiB: 1024}, ""},
		{"negative processes", domain.SandboxLimits{MaxProcesses: -1}, "sandboxLimits.maxProcesses"},
		{"too many processes", domain.SandboxLimits{MaxProcesses: domain.MaxSandboxProcesses + 1}, "sandboxLimits.maxProcesses"},
		{"too little memory", domain.SandboxLimits{MaxMemoryMiB: 1}, "sandboxLimits.maxMemoryMiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := templateParams()
			p.SandboxLimits = &c.limits
			tmpl, err := domain.NewAgentTemplate(p)
			if c.field != "" {
				var v *domain.ValidationError
				require.True(t, errors.As(err, &v), "%v", err)
				assert.Equal(t, c.field, v.FieldName)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.limits, tmpl.SandboxLimits())
			back, err := domain.UnmarshalAgentTemplateFromDatabase(tmpl.Snapshot())
			require.NoError(t, err)
			assert.Equal(t, c.limits, back.SandboxLimits(), "the limits are stored")
		})
	}

	t.Run("an update changes them, all or nothing", func(t *testing.T) {
		t.Parallel()
		tmpl, err := domain.NewAgentTemplate(templateParams())
		require.NoError(t, err)
		require.NoError(t, tmpl.Update(domain.TemplateUpdate{SandboxLimits: &domain.SandboxLimits{MaxProcesses: 32}}, time.Now()))
		assert.Equal(t, 32, tmpl.SandboxLimits().MaxProcesses)
		bad := ""
		err = tmpl.Update(domain.TemplateUpdate{Name: &bad, SandboxLimits: &domain.SandboxLimits{MaxProcesses: 8}}, time.Now())
		require.Error(t, err)
		assert.Equal(t, 32, tmpl.SandboxLimits().MaxProcesses)
	})
}
