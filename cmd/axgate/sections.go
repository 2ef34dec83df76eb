package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/axgate/axgate"
	"github.com/axgate/axgate/manifest"
	axnotify "github.com/axgate/axgate/notify"
)

// shadowOptions maps the enforce: section onto the actions of m: nil when
// every action is enforced. An intent m does not declare, and shadow (not
// shadow-force) for an action whose risk is critical, are errors that name
// the section's key.
func shadowOptions(s enforceSection, m *manifest.Manifest) (*axgate.ShadowOptions, error) {
	if s.empty() {
		return nil, nil
	}
	var problems []string
	var unknown []string
	for intent := range s.Intents {
		if intent != "*" && m.Action(intent) == nil {
			unknown = append(unknown, intent)
		}
	}
	sort.Strings(unknown)
	for _, intent := range unknown {
		problems = append(problems, fmt.Sprintf("enforce.%s: the manifest declares no action %q", intent, intent))
	}
	var o axgate.ShadowOptions
	for _, a := range m.Actions {
		key := a.Intent
		mode, ok := s.Intents[key]
		if !ok {
			key = "*"
			mode, ok = s.Intents[key]
		}
		if !ok || mode == modeEnforce {
			continue
		}
		o.Intents = append(o.Intents, a.Intent)
		if a.RiskLevel != manifest.RiskCritical {
			continue
		}
		if mode == modeShadowForce {
			o.ForceIntents = append(o.ForceIntents, a.Intent)
			continue
		}
		problems = append(problems, fmt.Sprintf("enforce.%s: %s is a critical action: shadow mode would let its refusals through; write shadow-force to mean it, or enforce it (%s: enforce)", key, a.Intent, a.Intent))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	if len(o.Intents) == 0 {
		// ShadowOptions.Intents empty would put every action in shadow mode.
		return nil, nil
	}
	return &o, nil
}

// notifyRoutes maps the notify: section onto the notifier's routes, reading
// each webhook's key from its variable or file: one route per tenant and
// intent a webhook names (a webhook naming neither hears of every request).
// notify picks the most specific routes that match a request.
func notifyRoutes(e *env, s notifySection) ([]axnotify.Route, error) {
	var routes []axnotify.Route
	var problems []string
	for i, w := range s.Webhooks {
		at := fmt.Sprintf("notify.webhooks[%d]", i)
		ep := axnotify.Endpoint{URL: w.URL, Format: axnotify.FormatJSON}
		if w.Format == "slack" {
			ep.Format = axnotify.FormatSlack
		}
		switch {
		case w.SecretEnv != "":
			v := e.getenv(w.SecretEnv)
			if v == "" {
				problems = append(problems, fmt.Sprintf("%s: secret-env %s is not set or empty", at, w.SecretEnv))
				continue
			}
			ep.Secret = []byte(v)
		case w.SecretFile != "":
			data, err := os.ReadFile(w.SecretFile)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: secret-file: %v", at, err))
				continue
			}
			// An editor's or echo's final newline is not part of the key.
			key := strings.TrimRight(string(data), "\r\n")
			if key == "" {
				problems = append(problems, fmt.Sprintf("%s: secret-file %s is empty", at, w.SecretFile))
				continue
			}
			ep.Secret = []byte(key)
		}
		tenants, intents := w.Tenants, w.Intents
		if len(tenants) == 0 {
			tenants = []string{""}
		}
		if len(intents) == 0 {
			intents = []string{""}
		}
		for _, t := range slices.Compact(slices.Sorted(slices.Values(tenants))) {
			for _, in := range slices.Compact(slices.Sorted(slices.Values(intents))) {
				routes = append(routes, axnotify.Route{Tenant: t, Intent: in, Endpoints: []axnotify.Endpoint{ep}})
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return routes, nil
}

// checkNotifyIntents fails when a webhook names an intent m does not
// declare, naming the webhook as the file does.
func checkNotifyIntents(s notifySection, m *manifest.Manifest) error {
	var problems []string
	for i, w := range s.Webhooks {
		for _, intent := range w.Intents {
			if m.Action(intent) == nil {
				problems = append(problems, fmt.Sprintf("notify.webhooks[%d].intents: the manifest declares no action %q", i, intent))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}
