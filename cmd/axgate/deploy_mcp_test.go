package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployKubernetesMCP checks deploy/kubernetes-mcp.yaml, the gateway
// of several upstreams with two replicas and Redis: every document decodes
// and has its kind's fields; the ConfigMap's axgate.yaml passes config
// check for mcp and its upstreams resolve against the ConfigMap's
// manifests (which pass lint); every file the configuration names is on a
// volume the container mounts, the credentials' files in the Secret; two
// replicas, ready on /readyz; the Service keeps a client on one pod
// (ClientIP affinity, docs/replicas.md) for the session idle timeout;
// redis: names the Redis Service.
func TestDeployKubernetesMCP(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes-mcp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string][]map[string]any{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("deploy/kubernetes-mcp.yaml: %v", err)
		}
		kind, _ := d["kind"].(string)
		if d["apiVersion"] == nil || dig(d, "metadata", "name") == nil {
			t.Errorf("a %s without apiVersion or name", kind)
		}
		docs[kind] = append(docs[kind], d)
	}
	for kind, n := range map[string]int{"ConfigMap": 1, "Secret": 1, "Deployment": 1, "Service": 2, "StatefulSet": 1} {
		if len(docs[kind]) != n {
			t.Fatalf("%d %s, want %d", len(docs[kind]), kind, n)
		}
	}
	cm, secret, dep := docs["ConfigMap"][0], docs["Secret"][0], docs["Deployment"][0]

	// The ConfigMap's files, where the container finds them, in a folder
	// of the test's.
	const cfgDir = "/etc/axgate"
	dir := t.TempDir()
	cmData, _ := dig(cm, "data").(map[string]any)
	for name, v := range cmData {
		text, _ := v.(string)
		writeTestFile(t, dir, name, strings.ReplaceAll(text, cfgDir+"/", dir+"/"))
		if strings.HasSuffix(name, ".json") {
			if out, _, code := cli(t, nil, "lint", filepath.Join(dir, name)); code != exitOK {
				t.Errorf("the ConfigMap's %s does not lint:\n%s", name, out)
			}
		}
	}
	cfgPath := filepath.Join(dir, "axgate.yaml")
	if out, stderr, code := cli(t, nil, "config", "check", "--command", "mcp", cfgPath); code != exitOK {
		t.Fatalf("the ConfigMap's axgate.yaml: exit %d\n%s%s", code, out, stderr)
	}
	fs, _, _ := mcpFlags(&env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
	cf, err := readConfigFile(cfgPath, fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.upstreams) < 2 {
		t.Fatalf("the ConfigMap's axgate.yaml has %d upstreams, want several", len(cf.upstreams))
	}
	if _, err := resolveUpstreams(cf, ""); err != nil {
		t.Errorf("the upstreams do not resolve against the ConfigMap's manifests: %v", err)
	}

	// The container: mcp with the ConfigMap's file, two replicas, ready
	// on /readyz, every file the configuration names on a mounted volume.
	pod := dig(dep, "spec", "template")
	c := dig(pod, "spec", "containers", 0)
	if toJSON(dig(c, "args")) != toJSON([]string{"mcp", "--config", cfgDir + "/axgate.yaml"}) {
		t.Errorf("container args %s", toJSON(dig(c, "args")))
	}
	if n, _ := dig(dep, "spec", "replicas").(int); n != 2 {
		t.Errorf("replicas %v, want 2", dig(dep, "spec", "replicas"))
	}
	if dig(c, "readinessProbe", "httpGet", "path") != "/readyz" || dig(c, "readinessProbe", "httpGet", "port") != "admin" {
		t.Errorf("readinessProbe %v, want GET /readyz on the admin port", dig(c, "readinessProbe"))
	}
	volumes := map[string]any{} // mount path → the volume's source
	for i := 0; dig(c, "volumeMounts", i) != nil; i++ {
		m := dig(c, "volumeMounts", i)
		for j := 0; dig(pod, "spec", "volumes", j) != nil; j++ {
			if v := dig(pod, "spec", "volumes", j); dig(v, "name") == dig(m, "name") {
				volumes[dig(m, "mountPath").(string)] = v
			}
		}
	}
	onVolume := func(path string) any {
		best := ""
		for mp := range volumes {
			if strings.HasPrefix(path, mp+"/") && len(mp) > len(best) {
				best = mp
			}
		}
		return volumes[best]
	}
	// The paths as the container sees them.
	back := func(p string) string { return strings.ReplaceAll(p, dir+"/", cfgDir+"/") }
	var files []string
	for _, k := range []string{"jwks", "signing-key"} {
		files = append(files, back(cf.values[k][0].value))
	}
	secretKeys, _ := dig(secret, "stringData").(map[string]any)
	for _, u := range cf.upstreams {
		files = append(files, back(u.manifest))
		var creds []string
		for _, p := range u.creds.headerFiles {
			creds = append(creds, back(p))
		}
		if te := u.creds.tokenExchange; te != nil {
			creds = append(creds, back(te.secretFile))
		}
		for _, p := range creds {
			files = append(files, p)
			v := onVolume(p)
			if dig(v, "secret", "secretName") != dig(secret, "metadata", "name") || secretKeys[filepath.Base(p)] == nil {
				t.Errorf("upstream %s: the credentials' file %s is not in the Secret %v", u.name, p, dig(secret, "metadata", "name"))
			}
		}
	}
	for _, f := range files {
		if onVolume(f) == nil {
			t.Errorf("%s is on no mounted volume", f)
		}
	}

	// Affinity for 2025-11-25 sessions on the gateway's Service, and the
	// shared Redis.
	gwSvc := docs["Service"][0]
	if dig(gwSvc, "metadata", "name") != dig(dep, "metadata", "name") {
		gwSvc = docs["Service"][1]
	}
	if secs, _ := dig(gwSvc, "spec", "sessionAffinityConfig", "clientIP", "timeoutSeconds").(int); dig(gwSvc, "spec", "sessionAffinity") != "ClientIP" || secs < 1800 {
		t.Errorf("the gateway's Service keeps no client on its pod for 1800 s: %v", dig(gwSvc, "spec"))
	}
	redisURL := cf.values["redis"][0].value
	found := false
	for _, s := range docs["Service"] {
		if name, _ := dig(s, "metadata", "name").(string); strings.HasPrefix(redisURL, "redis://"+name+":") {
			found = true
		}
	}
	if !found {
		t.Errorf("redis: %s names no Service of the file", redisURL)
	}
}
