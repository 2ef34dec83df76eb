package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// dig follows map keys (string) and list indexes (int) through a decoded
// YAML value; nil when the path does not exist.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// TestDeployKubernetes checks deploy/kubernetes.yaml structurally — the
// fields axgate relies on, where kubeconform's schemas cannot be had — and
// checks its ConfigMap with axgate itself: the configuration passes
// "config check", the manifest passes "lint", and the paths, ports and
// probes of the Deployment agree with them.
func TestDeployKubernetes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("deploy/kubernetes.yaml: %v", err)
		}
		kind, _ := d["kind"].(string)
		docs[kind] = d
	}
	wantAPI := map[string]string{"ConfigMap": "v1", "Deployment": "apps/v1", "Service": "v1"}
	for kind, api := range wantAPI {
		if d := docs[kind]; d == nil || d["apiVersion"] != api || dig(d, "metadata", "name") == nil {
			t.Fatalf("no %s (apiVersion %s, with a name): %v", kind, api, d)
		}
	}
	cm, dep, svc := docs["ConfigMap"], docs["Deployment"], docs["Service"]

	// The ConfigMap, checked by axgate.
	dir := t.TempDir()
	cfgText, _ := dig(cm, "data", "axgate.yaml").(string)
	manText, _ := dig(cm, "data", "manifest.json").(string)
	cfgPath, manPath := filepath.Join(dir, "axgate.yaml"), filepath.Join(dir, "manifest.json")
	os.WriteFile(cfgPath, []byte(cfgText), 0o600)
	os.WriteFile(manPath, []byte(manText), 0o600)
	if out, stderr, code := cli(t, nil, "config", "check", cfgPath); code != exitOK {
		t.Fatalf("the ConfigMap's axgate.yaml: exit %d\n%s%s", code, out, stderr)
	}
	if out, _, code := cli(t, nil, "lint", manPath); code != exitOK {
		t.Fatalf("the ConfigMap's manifest.json does not lint:\n%s", out)
	}
	fs, _, _ := serveFlags(&env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
	cf, err := readConfigFile(cfgPath, fs)
	if err != nil {
		t.Fatal(err)
	}
	value := func(k string) string {
		if v := cf.values[k]; len(v) == 1 {
			return v[0].value
		}
		return ""
	}

	pod := dig(dep, "spec", "template")
	c := dig(pod, "spec", "containers", 0)
	if c == nil {
		t.Fatal("the Deployment has no container")
	}
	// Volumes: the ConfigMap at the directory the arguments and the
	// configuration name.
	mounts := map[string]string{} // volume name → mount path
	for i := 0; dig(c, "volumeMounts", i) != nil; i++ {
		m := dig(c, "volumeMounts", i)
		mounts[dig(m, "name").(string)] = dig(m, "mountPath").(string)
		if dig(m, "readOnly") != true {
			t.Errorf("volume mount %v is not read-only", m)
		}
	}
	cmVolume := ""
	for i := 0; dig(pod, "spec", "volumes", i) != nil; i++ {
		v := dig(pod, "spec", "volumes", i)
		if dig(v, "configMap", "name") == dig(cm, "metadata", "name") {
			cmVolume = dig(v, "name").(string)
		}
	}
	cfgDir := mounts[cmVolume]
	if cfgDir == "" {
		t.Fatalf("the ConfigMap is not mounted: volumes %v, mounts %v", dig(pod, "spec", "volumes"), mounts)
	}
	args := toJSON(dig(c, "args"))
	if args != toJSON([]string{"serve", "--config", cfgDir + "/axgate.yaml"}) {
		t.Errorf("container args %s, want serve --config %s/axgate.yaml", args, cfgDir)
	}
	if value("manifest") != cfgDir+"/manifest.json" {
		t.Errorf("manifest: %s is not the ConfigMap's manifest.json under %s", value("manifest"), cfgDir)
	}
	if j := value("jwks"); j == "" || !slices.ContainsFunc(mapValues(mounts), func(d string) bool { return d != cfgDir && strings.HasPrefix(j, d+"/") }) {
		t.Errorf("jwks: %s is on no mounted volume (%v)", j, mounts)
	}

	// Ports: the container's named ports are the configuration's.
	ports := map[string]string{}
	for i := 0; dig(c, "ports", i) != nil; i++ {
		p := dig(c, "ports", i)
		ports[dig(p, "name").(string)] = toJSON(dig(p, "containerPort"))
	}
	for name, key := range map[string]string{"http": "listen", "admin": "admin"} {
		if _, port, _ := strings.Cut(value(key), ":"); port == "" || ports[name] != port {
			t.Errorf("container port %s is %s, but %s is %q", name, ports[name], key, value(key))
		}
	}
	// Probes on the admin server.
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if dig(c, probe, "httpGet", "path") != path || dig(c, probe, "httpGet", "port") != "admin" {
			t.Errorf("%s: %v, want GET %s on the admin port", probe, dig(c, probe), path)
		}
	}
	// Non-root, read-only, nothing to escalate.
	if dig(pod, "spec", "securityContext", "runAsNonRoot") != true || dig(pod, "spec", "securityContext", "runAsUser") == 0 {
		t.Errorf("pod securityContext: %v", dig(pod, "spec", "securityContext"))
	}
	sc := dig(c, "securityContext")
	if dig(sc, "readOnlyRootFilesystem") != true || dig(sc, "allowPrivilegeEscalation") != false || toJSON(dig(sc, "capabilities", "drop")) != `["ALL"]` {
		t.Errorf("container securityContext: %v", sc)
	}
	// Selectors match the pod's labels; the Service targets the http port.
	labels, _ := dig(pod, "metadata", "labels").(map[string]any)
	for what, sel := range map[string]any{"Deployment": dig(dep, "spec", "selector", "matchLabels"), "Service": dig(svc, "spec", "selector")} {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s has no selector", what)
		}
		for k, v := range m {
			if labels[k] != v {
				t.Errorf("%s selects %s=%v, the pod has %v", what, k, v, labels[k])
			}
		}
	}
	if tp := dig(svc, "spec", "ports", 0, "targetPort"); tp != "http" {
		t.Errorf("the Service targets %v, want the http port", tp)
	}

	// The image's default command is the one the Deployment runs.
	df, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), `CMD ["serve", "--config", "`+cfgDir+`/axgate.yaml"]`) {
		t.Errorf("the Dockerfile's CMD does not read %s/axgate.yaml", cfgDir)
	}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestDockerfile checks the Dockerfile's structure where no Docker daemon
// can build it: a build stage, a static binary (CGO_ENABLED=0), a final
// stage from distroless or scratch that runs as a numeric non-root user.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]string // instructions of each stage
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("an instruction before the first FROM: %s", line)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], line)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}
	build := strings.Join(stages[0], "\n")
	if !regexp.MustCompile(`(?m)^FROM golang:\S+ AS build$`).MatchString(build) ||
		!regexp.MustCompile(`(?m)^RUN CGO_ENABLED=0 go build .* ./cmd/axgate$`).MatchString(build) {
		t.Errorf("the build stage does not build a static axgate:\n%s", build)
	}
	final := stages[len(stages)-1]
	if !regexp.MustCompile(`^FROM (gcr\.io/distroless/static\S*|scratch)$`).MatchString(final[0]) {
		t.Errorf("final stage %q: want distroless static or scratch", final[0])
	}
	user := ""
	for _, l := range final {
		if u, ok := strings.CutPrefix(l, "USER "); ok {
			user = u
		}
	}
	if m := regexp.MustCompile(`^([0-9]+)(:[0-9]+)?$`).FindStringSubmatch(user); m == nil || m[1] == "0" {
		t.Errorf("final stage USER %q: want a numeric non-root user", user)
	}
	if !slices.ContainsFunc(final, func(l string) bool { return strings.HasPrefix(l, `ENTRYPOINT ["/usr/local/bin/axgate"]`) }) ||
		!slices.ContainsFunc(final, func(l string) bool { return strings.HasPrefix(l, "COPY --from=build ") }) {
		t.Errorf("final stage does not run the built binary:\n%s", strings.Join(final, "\n"))
	}
}

// TestDeployExampleConfiguration: the configuration the Dockerfile's
// example mounts (deploy/axgate.yaml and the manifest it names) exists,
// passes config check, is the one the Kubernetes ConfigMap holds, and
// serves: with the paths and addresses of this machine put in by flags,
// serve starts on it, forwards an allowed call, and reloads an edited
// manifest on SIGHUP (docker kill --signal HUP, the reload the
// Dockerfile's comment gives an image without a shell).
func TestDeployExampleConfiguration(t *testing.T) {
	t.Parallel()
	deploy := filepath.Join("..", "..", "deploy")
	cfg, err := os.ReadFile(filepath.Join(deploy, "axgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	man, err := os.ReadFile(filepath.Join(deploy, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := cli(t, nil, "config", "check", filepath.Join(deploy, "axgate.yaml")); code != exitOK {
		t.Fatalf("deploy/axgate.yaml: exit %d\n%s%s", code, out, stderr)
	}

	// The ConfigMap holds the same files.
	k8s, err := os.ReadFile(filepath.Join(deploy, "kubernetes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(k8s))
	for cm == nil || cm["kind"] != "ConfigMap" {
		cm = nil
		if err := dec.Decode(&cm); err != nil {
			t.Fatalf("deploy/kubernetes.yaml has no ConfigMap: %v", err)
		}
	}
	var body []string // deploy/axgate.yaml without its leading comment
	for line := range strings.Lines(string(cfg)) {
		if len(body) > 0 || !strings.HasPrefix(line, "#") {
			body = append(body, line)
		}
	}
	if got := dig(cm, "data", "axgate.yaml"); got != strings.Join(body, "") {
		t.Errorf("the ConfigMap's axgate.yaml is not deploy/axgate.yaml:\n%v", got)
	}
	if got := dig(cm, "data", "manifest.json"); got != string(man) {
		t.Errorf("the ConfigMap's manifest.json is not deploy/manifest.json:\n%v", got)
	}

	// The Dockerfile's example mounts deploy/ where its CMD reads.
	df, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`(?m)^CMD \["serve", "--config", "(/[^"]+)/axgate\.yaml"\]$`).FindStringSubmatch(string(df))
	if cmd == nil || !strings.Contains(string(df), `-v "$PWD/deploy:`+cmd[1]+`:ro"`) {
		t.Errorf("the Dockerfile's docker run does not mount deploy/ where its CMD reads the configuration (%v)", cmd)
	}

	// It serves, and reloads on SIGHUP.
	pki := newServePKI(t)
	up := &fakeUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	manPath := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(manPath, man, 0o600); err != nil {
		t.Fatal(err)
	}
	rs := startServe(t, nil, "--config", filepath.Join(deploy, "axgate.yaml"), "--manifest", manPath, "--jwks", pki.jwks,
		"--upstream", upSrv.URL, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	if status, body := post(t, rs.base, "/tools/product_search/call", pki.bearer, `{"query":"lamp"}`); status != http.StatusOK {
		t.Fatalf("product_search through deploy/axgate.yaml: %d %v", status, body)
	}
	edited := strings.Replace(string(man), `"maxLength": 200`, `"maxLength": 3`, 1)
	if edited == string(man) {
		t.Fatal(`deploy/manifest.json has no "maxLength": 200 to edit`)
	}
	if err := os.WriteFile(manPath, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	rs.hup <- nil
	rs.log.waitFor(t, "manifest reloaded")
	if status, body := post(t, rs.base, "/tools/product_search/call", pki.bearer, `{"query":"lamp"}`); errorCode(body) != "AXAG_OUT_OF_RANGE" {
		t.Errorf("after the reload, a query over the new maxLength: %d %v, want AXAG_OUT_OF_RANGE", status, body)
	}
}
