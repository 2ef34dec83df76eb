package main

import (
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/axgate/axgate/middleware"
)

// confirmManifest declares newEchoUpstream's say as a call the person
// confirms and an admin approves.
var confirmManifest = filepath.Join("testdata", "mcp", "confirm.axag.json")

// Audiences of the --human tests: the agents' tokens and the people's.
const (
	agentsAudience = "axgate-agents"
	peopleAudience = "axgate-people"
)

// gatewayProcess is the axgate binary (this test binary as axgate) running
// mcp with a real listener, and its --human endpoints.
type gatewayProcess struct {
	url, human string
	log        *lineWatcher
	cmd        *exec.Cmd
	exited     chan error
	stderrW    *io.PipeWriter
}

// startGatewayProcess runs "axgate mcp ARGS --listen 127.0.0.1:0 --human
// 127.0.0.1:0" as a process of its own and waits until it listens.
func startGatewayProcess(t *testing.T, args ...string) *gatewayProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"mcp", "--listen", "127.0.0.1:0", "--human", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), testAs+"=axgate")
	stderr, stderrW := io.Pipe()
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g := &gatewayProcess{log: newLineWatcher(stderr), cmd: cmd, exited: make(chan error, 1), stderrW: stderrW}
	go func() { g.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-g.exited
		}
		stderrW.Close()
	})
	addr := regexp.MustCompile(`addr=(\S+)`)
	g.human = addr.FindStringSubmatch(g.log.waitFor(t, "confirm and approve at"))[1]
	g.url = addr.FindStringSubmatch(g.log.waitFor(t, "axgate mcp: listening"))[1]
	return g
}

// stop stops the process with SIGTERM and waits until it exited.
func (g *gatewayProcess) stop(t *testing.T) {
	t.Helper()
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-g.exited:
		if err != nil {
			t.Fatalf("axgate mcp did not exit cleanly: %v\n%s", err, g.log.all())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("axgate mcp did not stop on SIGTERM\n%s", g.log.all())
	}
}

// humanPKI is the keys of the --human tests and the tokens they mint: the
// agents' bearer tokens and the people's, for alice (an editor, the agent's
// principal) and bob (an admin who approves).
type humanPKI struct {
	servePKI
	aliceAgent, aliceAgentBob, alicePerson, bobPerson, bobAgent string
}

func newHumanPKI(t *testing.T) humanPKI {
	p := humanPKI{servePKI: newServePKI(t)}
	tok := func(aud, sub, roles string) string {
		return mint(t, "principal", "--key", p.key, "--sub", sub, "--roles", roles, "--aud", aud)
	}
	p.aliceAgent, p.alicePerson = tok(agentsAudience, "alice", "editor"), tok(peopleAudience, "alice", "editor")
	p.bobAgent, p.bobPerson = tok(agentsAudience, "bob", "admin"), tok(peopleAudience, "bob", "admin")
	return p
}

// gatewayArgs are the flags of a gateway in front of upURL that signs what it
// mints with the PKI's key, which outlives the process.
func (p humanPKI) gatewayArgs(upURL string) []string {
	return []string{"--manifest", confirmManifest, "--upstream-url", upURL, "--jwks", p.jwks, "--signing-key", p.key,
		"--audience", agentsAudience, "--human-audience", peopleAudience}
}

// confirmAt asks --human for a confirmation of say(args) as bearer, and
// returns the status and body.
func confirmAt(t *testing.T, human, bearer, args string) (int, map[string]any) {
	t.Helper()
	return post(t, human, "/confirmations", bearer, `{"tool":"say","arguments":`+args+`}`)
}

// TestMCPHumanTakesPeoplesTokensOnly: with the real binary, an agent refused
// for want of a confirmation cannot mint one at --human with its own bearer
// token (401 in an AXAG envelope, reason wrong_audience), nor approve with
// an admin's agent token; the person's token of --human-audience gets the
// confirmation, and the admin's the approval, and the call runs.
func TestMCPHumanTakesPeoplesTokensOnly(t *testing.T) {
	t.Parallel()
	upURL, _ := newEchoUpstream(t)
	pki := newHumanPKI(t)
	gw := startGatewayProcess(t, pki.gatewayArgs(upURL)...)
	alice := connect(t, gw.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	const args = `{"text":"hi","times":2}`
	say := map[string]any{"text": "hi", "times": 2}
	refused(t, callTool(t, alice, "say", say), "AXAG_CONFIRMATION_MISSING", "")

	// The agent's own token at --human: refused, nothing minted.
	code, body := confirmAt(t, gw.human, pki.aliceAgent, args)
	if code != http.StatusUnauthorized || errorCode(body) != "AXGATE_UNAUTHENTICATED" || errorDetails(body)["reason"] != "wrong_audience" || body["token"] != nil {
		t.Fatalf("the agent's token at --human: %d %v, want 401 AXGATE_UNAUTHENTICATED (wrong_audience)", code, body)
	}
	// The person's: a confirmation.
	code, body = confirmAt(t, gw.human, pki.alicePerson, args)
	confirmation, _ := body["token"].(string)
	if code != http.StatusOK || confirmation == "" {
		t.Fatalf("the person's token at --human: %d %v", code, body)
	}
	details := refused(t, callTool(t, alice, "say", say, middleware.Credentials{Confirmation: confirmation}), "AXAG_APPROVAL_MISSING", "")
	id, _ := details["approval_request_id"].(string)
	if id == "" {
		t.Fatalf("no approval request in %v", details)
	}
	// An admin's agent token neither lists nor decides the request.
	req, _ := http.NewRequest(http.MethodGet, gw.human+"/approvals", nil)
	req.Header.Set("Authorization", "Bearer "+pki.bobAgent)
	if code, body := do(t, req); code != http.StatusUnauthorized || errorCode(body) != "AXGATE_UNAUTHENTICATED" {
		t.Errorf("an admin's agent token lists the approvals: %d %v", code, body)
	}
	if code, body := post(t, gw.human, "/approvals/"+id, pki.bobAgent, `{"approve":true}`); code != http.StatusUnauthorized || body["token"] != nil {
		t.Fatalf("an admin's agent token approves: %d %v", code, body)
	}
	code, body = post(t, gw.human, "/approvals/"+id, pki.bobPerson, `{"approve":true}`)
	approval, _ := body["token"].(string)
	if code != http.StatusOK || approval == "" {
		t.Fatalf("the admin's person token: %d %v", code, body)
	}
	if res := callTool(t, alice, "say", say, middleware.Credentials{Confirmation: confirmation, Approvals: []string{approval}}); res.IsError {
		t.Fatalf("the confirmed and approved call: %s", resultText(res))
	}
	gw.stop(t)
}

// sayArgs is say's arguments for text, as JSON and as a map.
func sayArgs(text string) (string, map[string]any) {
	return `{"text":"` + text + `","times":1}`, map[string]any{"text": text, "times": 1}
}

// confirmedAndApproved asks gw's --human for alice's confirmation of say(text),
// then for bob's approval of the request that call opens.
func confirmedAndApproved(t *testing.T, gw *gatewayProcess, alice *mcp.ClientSession, pki humanPKI, text string) middleware.Credentials {
	t.Helper()
	args, say := sayArgs(text)
	code, body := confirmAt(t, gw.human, pki.alicePerson, args)
	confirmation, _ := body["token"].(string)
	if code != http.StatusOK || confirmation == "" {
		t.Fatalf("confirmation: %d %v", code, body)
	}
	details := refused(t, callTool(t, alice, "say", say, middleware.Credentials{Confirmation: confirmation}), "AXAG_APPROVAL_MISSING", "")
	id, _ := details["approval_request_id"].(string)
	code, body = post(t, gw.human, "/approvals/"+id, pki.bobPerson, `{"approve":true}`)
	approval, _ := body["token"].(string)
	if code != http.StatusOK || approval == "" {
		t.Fatalf("approval: %d %v", code, body)
	}
	return middleware.Credentials{Confirmation: confirmation, Approvals: []string{approval}}
}

// restart stops gw and starts it again with args.
func restart(t *testing.T, gw *gatewayProcess, args []string) *gatewayProcess {
	t.Helper()
	gw.stop(t)
	return startGatewayProcess(t, args...)
}

// TestMCPSpentTokensStaySpentAcrossARestart: with the real binary, its
// spent tokens in memory (no --redis) and a --signing-key that outlives it,
// a confirmation and an approval spent before a restart do not run the call
// again after it: the confirmation is refused, and so is the approval with
// a new confirmation, both with reason issued_before_start and a message
// that says a restart voids outstanding tokens. Tokens minted after the
// restart run it.
func TestMCPSpentTokensStaySpentAcrossARestart(t *testing.T) {
	t.Parallel()
	upURL, _ := newEchoUpstream(t)
	pki := newHumanPKI(t)
	_, say := sayArgs("pay")

	first := startGatewayProcess(t, pki.gatewayArgs(upURL)...)
	alice := connect(t, first.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	spent := confirmedAndApproved(t, first, alice, pki, "pay")
	if res := callTool(t, alice, "say", say, spent); res.IsError {
		t.Fatalf("before the restart: %s", resultText(res))
	}
	refused(t, callTool(t, alice, "say", say, spent), "AXAG_CONFIRMATION_MISSING", "already_used")
	alice.Close()

	second := restart(t, first, pki.gatewayArgs(upURL))
	alice = connect(t, second.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	fresh := confirmedAndApproved(t, second, alice, pki, "pay")
	res := callTool(t, alice, "say", say, spent)
	refused(t, res, "AXAG_CONFIRMATION_MISSING", "issued_before_start")
	if !strings.Contains(resultText(res), "a restart voids outstanding tokens") {
		t.Errorf("the refusal does not say why: %s", resultText(res))
	}
	// A new confirmation, the approval spent before the restart.
	details := refused(t, callTool(t, alice, "say", say, middleware.Credentials{Confirmation: fresh.Confirmation, Approvals: spent.Approvals}), "AXAG_APPROVAL_MISSING", "")
	if rejected, _ := details["rejected_tokens"].([]any); len(rejected) != 1 || rejected[0].(map[string]any)["reason"] != "issued_before_start" {
		t.Errorf("the approval spent before the restart: rejected_tokens %v, want one issued_before_start", details["rejected_tokens"])
	}
	// Tokens minted after the restart run the call.
	if res := callTool(t, alice, "say", say, fresh); res.IsError {
		t.Fatalf("tokens minted after the restart: %s", resultText(res))
	}
	second.stop(t)
}

// TestMCPSpentTokensStaySpentAcrossARestartWithRedis: with --redis the
// spent tokens outlive the process: after a restart the spent confirmation
// is refused as already used, and tokens minted before the restart but not
// spent yet still run the call.
func TestMCPSpentTokensStaySpentAcrossARestartWithRedis(t *testing.T) {
	t.Parallel()
	redisURL := os.Getenv("AXGATE_REDIS_URL")
	if redisURL == "" {
		t.Skip("no Redis: set AXGATE_REDIS_URL (bash .ci/redis.sh prints one)")
	}
	upURL, _ := newEchoUpstream(t)
	pki := newHumanPKI(t)
	args := append(pki.gatewayArgs(upURL), "--redis", redisURL)
	// Texts of this run only: approval requests stay in Redis, keyed by
	// the call.
	spentText, keptText := "s"+strings.ToLower(rand.Text()[:12]), "k"+strings.ToLower(rand.Text()[:12])
	_, spentSay := sayArgs(spentText)
	_, keptSay := sayArgs(keptText)

	first := startGatewayProcess(t, args...)
	alice := connect(t, first.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	spent := confirmedAndApproved(t, first, alice, pki, spentText)
	kept := confirmedAndApproved(t, first, alice, pki, keptText)
	if res := callTool(t, alice, "say", spentSay, spent); res.IsError {
		t.Fatalf("before the restart: %s", resultText(res))
	}
	alice.Close()

	second := restart(t, first, args)
	alice = connect(t, second.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	refused(t, callTool(t, alice, "say", spentSay, spent), "AXAG_CONFIRMATION_MISSING", "already_used")
	if res := callTool(t, alice, "say", keptSay, kept); res.IsError {
		t.Fatalf("tokens minted before the restart, not spent: %s", resultText(res))
	}
	second.stop(t)
}

// TestMCPHumanConfirmationsAreNotAnsweredByTheAgentsClient: with --human
// the operator has said where people confirm (with people's tokens, never
// the agents'), so the gateway does not ask the agent's own MCP client
// instead: an agent holding only its token, whose client offers
// elicitation and accepts every question itself, is not asked, and its call
// is refused for want of a confirmation (AXAG_CONFIRMATION_MISSING), as at
// --human with its token.
// --trust-client-elicitation, the operator's word that the clients'
// answers are people's, asks the client again, and says at start that this
// is HTTP; --inline-confirmation, its deprecated name, does the same and
// says it is deprecated.
func TestMCPHumanConfirmationsAreNotAnsweredByTheAgentsClient(t *testing.T) {
	t.Parallel()
	upURL, _ := newEchoUpstream(t)
	pki := newHumanPKI(t)
	gw := startGatewayProcess(t, pki.gatewayArgs(upURL)...)
	asked := make(chan struct{}, 1)
	selfAccept := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		select {
		case asked <- struct{}{}:
		default:
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	alice := agent(t, gw.url, pki.aliceAgent, &mcp.ClientOptions{ElicitationHandler: selfAccept})
	_, say := sayArgs("self")
	refused(t, callTool(t, alice, "say", say), "AXAG_CONFIRMATION_MISSING", "")
	select {
	case <-asked:
		t.Error("the gateway asked the agent's client to confirm the agent's call")
	default:
	}
	gw.stop(t)

	for _, flag := range []string{"--trust-client-elicitation", "--inline-confirmation"} {
		gw = startGatewayProcess(t, append(pki.gatewayArgs(upURL), flag)...)
		gw.log.waitFor(t, "--trust-client-elicitation over HTTP")
		if flag == "--inline-confirmation" {
			gw.log.waitFor(t, "--inline-confirmation is deprecated")
		}
		alice = agent(t, gw.url, pki.aliceAgent, &mcp.ClientOptions{ElicitationHandler: selfAccept})
		refused(t, callTool(t, alice, "say", say), "AXAG_APPROVAL_MISSING", "")
		select {
		case <-asked:
		default:
			t.Errorf("with %s the client was not asked", flag)
		}
		gw.stop(t)
	}
}

// TestMCPSpentTokensStaySpentAcrossARestartInTheSameSecond: a confirmation
// and an approval minted and spent just before a restart stay spent when
// the new process starts in the very second they were minted in (iat has
// whole seconds): the restart is made as fast as it can be, right after a
// second began.
func TestMCPSpentTokensStaySpentAcrossARestartInTheSameSecond(t *testing.T) {
	t.Parallel()
	upURL, _ := newEchoUpstream(t)
	pki := newHumanPKI(t)
	_, say := sayArgs("twice")
	args := pki.gatewayArgs(upURL)

	first := startGatewayProcess(t, args...)
	// Right after a second begins, so that the restart falls in it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	began := time.Now()
	alice := connect(t, first.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	spent := confirmedAndApproved(t, first, alice, pki, "twice")
	if res := callTool(t, alice, "say", say, spent); res.IsError {
		t.Fatalf("before the restart: %s", resultText(res))
	}
	t.Logf("spent %v after the second began", time.Since(began))
	alice.Close()
	// Killed, as a crash would.
	first.cmd.Process.Kill()
	<-first.exited
	t.Logf("stopped %v after the second began", time.Since(began))
	second := startGatewayProcess(t, args...)
	t.Logf("restarted %v after the second began", time.Since(began))
	alice = connect(t, second.url, &http.Client{Transport: bearerTransport{pki.aliceAgent}})
	refused(t, callTool(t, alice, "say", say, spent), "AXAG_CONFIRMATION_MISSING", "issued_before_start")
	second.stop(t)
}
