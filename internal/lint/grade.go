package lint

import (
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/axgate/axgate/manifest"
)

// ValidatorVersion names the rules and the score Lint applies. It changes
// whenever a rule or the score changes, so that two grade reports with the
// same version are comparable.
const ValidatorVersion = "axgate-lint/1.0"

// Status is the outcome of the deterministic checks.
type Status string

// PASS means no finding is an error (warnings are allowed).
const (
	StatusPass Status = "PASS"
	StatusFail Status = "FAIL"
)

// Quality is the deterministic quality score of a manifest, 0.0 to 5.0.
//
// It is the mean over its actions of four criteria worth 1.25 each.
//
//   - description: 1 for a description of at least 3 words and 15
//     characters that says more than the intent; 0.5 for a shorter one; 0
//     for none.
//   - parameters_described: the share of declared parameters (nested ones
//     included) that have a description; 1 when the action declares it
//     takes none; 0 when it says nothing about parameters.
//   - constraints: the share of numbers with a min, max or enum and of
//     strings with an enum, format, pattern, minLength or maxLength; 1 when
//     nothing is constrainable; 0 when parameters are not declared.
//   - safety: the share of the safety declarations that apply: risk_level
//     and scope always; idempotent and side_effects for write and delete;
//     confirmation or approval for high and critical risk; approval_roles
//     when approval is required.
//
// The score is rounded to one decimal, the criteria to two. A manifest
// without actions scores 0.
type Quality struct {
	Score    float64     `json:"score"`
	Criteria []Criterion `json:"criteria"`
}

// Criterion is one part of the quality score, averaged over the actions.
type Criterion struct {
	Name  string  `json:"name"`
	Score float64 `json:"score"`
	Max   float64 `json:"max"`
}

// criterionWeight is the share of the 5.0 maximum each criterion carries.
const criterionWeight = 1.25

var criterionNames = []string{"description", "parameters_described", "constraints", "safety"}

func score(m *manifest.Manifest) Quality {
	sums := make([]float64, len(criterionNames))
	for _, a := range m.Actions {
		for i, v := range []float64{descriptionScore(a), describedScore(a), constraintScore(a), safetyScore(a)} {
			sums[i] += v
		}
	}
	q := Quality{Criteria: make([]Criterion, len(criterionNames))}
	total := 0.0
	for i, name := range criterionNames {
		mean := 0.0
		if n := len(m.Actions); n > 0 {
			mean = sums[i] / float64(n) * criterionWeight
		}
		total += mean
		q.Criteria[i] = Criterion{Name: name, Score: round(mean, 2), Max: criterionWeight}
	}
	q.Score = round(total, 1)
	return q
}

func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	// The epsilon keeps 4.45 (stored as 4.4499…) from rounding down.
	return math.Round(x*p+1e-9) / p
}

func descriptionScore(a *manifest.Action) float64 {
	d := strings.TrimSpace(a.Description)
	if d == "" {
		return 0
	}
	words := strings.Fields(d)
	same := conditionKey(strings.NewReplacer(".", " ", "_", " ").Replace(a.Intent)) == conditionKey(d)
	if len(words) >= 3 && len(d) >= 15 && !same {
		return 1
	}
	return 0.5
}

// walkParams calls f for every named parameter, nested ones included.
func walkParams(ps []*manifest.Parameter, f func(*manifest.Parameter)) {
	for _, p := range ps {
		f(p)
		walkParams(p.Properties, f)
		for it := p.Items; it != nil; it = it.Items {
			walkParams(it.Properties, f)
		}
	}
}

func describedScore(a *manifest.Action) float64 {
	if !a.ParametersDeclared {
		return 0
	}
	n, ok := 0, 0
	walkParams(a.Parameters, func(p *manifest.Parameter) {
		n++
		if strings.TrimSpace(p.Description) != "" {
			ok++
		}
	})
	if n == 0 {
		return 1
	}
	return float64(ok) / float64(n)
}

func constraintScore(a *manifest.Action) float64 {
	if !a.ParametersDeclared {
		return 0
	}
	n, ok := 0, 0
	walkParams(a.Parameters, func(p *manifest.Parameter) {
		switch p.Type {
		case "number", "integer":
			n++
			if p.Minimum != nil || p.Maximum != nil || p.Enum != nil {
				ok++
			}
		case "string":
			n++
			if p.Enum != nil || p.Format != "" || p.Pattern != "" || p.MinLength != nil || p.MaxLength != nil {
				ok++
			}
		}
	})
	if n == 0 {
		return 1
	}
	return float64(ok) / float64(n)
}

func safetyScore(a *manifest.Action) float64 {
	var checks []bool
	checks = append(checks, a.RiskLevel != "", a.Scope != "")
	if a.Type == manifest.Write || a.Type == manifest.Delete {
		checks = append(checks, a.Idempotent != nil, a.SideEffects != nil)
	}
	if a.RiskLevel.AtLeast(manifest.RiskHigh) {
		checks = append(checks, a.ConfirmationRequired || a.ApprovalRequired)
	}
	if a.ApprovalRequired {
		checks = append(checks, len(a.ApprovalRoles) > 0)
	}
	ok := 0
	for _, c := range checks {
		if c {
			ok++
		}
	}
	return float64(ok) / float64(len(checks))
}

// gradeFor returns the letter grade of the grade table: F when the
// deterministic checks fail; otherwise A from 4.0, B from 3.0, C from 2.0,
// D below.
func gradeFor(status Status, score float64) string {
	switch {
	case status != StatusPass:
		return "F"
	case score >= 4.0:
		return "A"
	case score >= 3.0:
		return "B"
	case score >= 2.0:
		return "C"
	}
	return "D"
}

// Deterministic is the outcome of the deterministic checks.
type Deterministic struct {
	Status   Status    `json:"status"`
	Errors   []Finding `json:"errors"`
	Warnings []Finding `json:"warnings"`
}

// GradeReport is the record of one lint run, in the shape of the grade
// report of the two-layer validation strategy: the deterministic layer is
// Lint's findings, and the quality score (deterministic here too) takes the
// place of the probabilistic one.
type GradeReport struct {
	// ManifestID identifies the manifest: namespace/name (see ManifestID).
	ManifestID       string `json:"manifestId"`
	ValidatorVersion string `json:"validatorVersion"`
	// Timestamp is when the report was made, RFC 3339 in UTC.
	Timestamp string `json:"timestamp"`
	// Conformance is the level that was checked.
	Conformance   Level         `json:"conformance"`
	Deterministic Deterministic `json:"deterministic"`
	Quality       Quality       `json:"quality"`
	// Actions are the intents of every action checked, in document order.
	Actions []string `json:"actions"`
	// FailingActions are the intents of the actions with errors: the ones
	// the partial schema policy removes before deployment.
	FailingActions []string `json:"failingActions"`
	Grade          string   `json:"grade"`
}

// Report returns the grade report of the lint result, stamped with now.
// An empty id is derived with ManifestID.
func (r *LintResult) Report(id string, now time.Time) GradeReport {
	if id == "" {
		id = manifestID(r.Source, r.sourceURL, r.tool)
	}
	rep := GradeReport{
		ManifestID:       id,
		ValidatorVersion: ValidatorVersion,
		Timestamp:        now.UTC().Format(time.RFC3339),
		Conformance:      r.Level,
		Deterministic: Deterministic{
			Status:   StatusPass,
			Errors:   r.Errors(),
			Warnings: r.Warnings(),
		},
		Quality:        r.Quality,
		Actions:        []string{},
		FailingActions: []string{},
	}
	if rep.Quality.Criteria == nil {
		rep.Quality = Quality{Criteria: []Criterion{}}
	}
	if len(rep.Deterministic.Errors) > 0 {
		rep.Deterministic.Status = StatusFail
	}
	for _, a := range r.Actions {
		rep.Actions = append(rep.Actions, a.Intent)
		if a.Failing {
			rep.FailingActions = append(rep.FailingActions, a.Intent)
		}
	}
	rep.Grade = gradeFor(rep.Deterministic.Status, rep.Quality.Score)
	return rep
}

// manifestID derives a manifest id of the form namespace/name, one slash, as
// the grade report's schema id: the namespace is the host of source.url,
// else source.tool, else "local"; the name is the file name without its
// extension ("manifest" when there is none).
func manifestID(source, sourceURL, tool string) string {
	ns := "local"
	if u, err := url.Parse(sourceURL); err == nil && u.Hostname() != "" {
		ns = u.Hostname()
	} else if t := strings.TrimSpace(tool); t != "" {
		ns = t
	}
	name := strings.TrimSuffix(filepath.Base(source), filepath.Ext(source))
	if source == "" || name == "" || name == "." || name == "/" {
		name = "manifest"
	}
	clean := func(s string) string { return strings.ReplaceAll(s, "/", "-") }
	return clean(ns) + "/" + clean(name)
}
