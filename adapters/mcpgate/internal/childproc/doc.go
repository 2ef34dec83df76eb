// Package childproc runs the child process of a command upstream: it
// starts the command with its environment (Env), speaks MCP to it over
// its standard input and output with every line bounded (Transport), and
// stops the child and everything it started when the connection closes.
//
// Stopping follows the go-sdk's CommandTransport: standard input closed,
// then SIGTERM, then SIGKILL, each Grace apart; but each signal goes to
// every process of the child's session (the child runs in a session of its
// own on unix), and once the child has exited what is left of its session
// is killed. Where the system has no process groups only the child is
// signalled; where it has no /proc (unix but not Linux) the child's first
// process group is, not the rest of its session.
package childproc
