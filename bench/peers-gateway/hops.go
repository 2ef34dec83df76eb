package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The processes the runner starts from its own binary: each hop and each
// upstream is a process of its own, so that /proc tells its CPU time and
// peak RSS apart from the agents'.

// readDoc is what the read tool answers: a small document (~200 bytes), as
// in adapters/mcpgate/gateway's BenchmarkGatewayRead.
const readDoc = `{"path":"docs/intro.md","size":142,"text":"axgate enforces AXAG manifests on the tool calls of AI agents: intent, roles, parameters, constraints, rate limits, confirmations."}`

type pathArgs struct {
	Path string `json:"path" jsonschema:"the document's path"`
}

type writeArgs struct {
	Path string `json:"path" jsonschema:"the document's path"`
	Text string `json:"text" jsonschema:"the new text"`
}

// serveMCPUpstream is the upstream MCP server: a go-sdk server over
// streamable HTTP (event-stream answers, the go-sdk's default) whose tools
// take work each (a file or database read, simulated).
func serveMCPUpstream(args []string) {
	fs := flag.NewFlagSet("mcp-upstream", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	work := fs.Duration("work", 0, "how long each tool call works")
	stateless := fs.Bool("stateless", false, "serve without sessions (StreamableHTTPOptions.Stateless: what MCP 2026-07-28 needs of a go-sdk v1.8.0 server)")
	fs.Parse(args)
	srv := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "v1"}, nil)
	sleep := func() {
		if *work > 0 {
			time.Sleep(*work)
		}
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "Read one document by its path."},
		func(context.Context, *mcp.CallToolRequest, pathArgs) (*mcp.CallToolResult, any, error) {
			sleep()
			return text(readDoc), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "write", Description: "Replace one document's text."},
		func(_ context.Context, _ *mcp.CallToolRequest, in writeArgs) (*mcp.CallToolResult, any, error) {
			sleep()
			return text(`{"written":` + strconv.Quote(in.Path) + `}`), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "stat", Description: "A document's size."},
		func(context.Context, *mcp.CallToolRequest, pathArgs) (*mcp.CallToolResult, any, error) {
			sleep()
			return text(`{"size":142}`), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "publish", Description: "Publish one document."},
		func(context.Context, *mcp.CallToolRequest, pathArgs) (*mcp.CallToolResult, any, error) {
			sleep()
			return text(`{"published":true}`), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "peek", Description: "A document's first line."},
		func(context.Context, *mcp.CallToolRequest, pathArgs) (*mcp.CallToolResult, any, error) {
			sleep()
			return text(`{"line":"axgate"}`), nil, nil
		})
	listenAndServe(*addr, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: *stateless}))
}

// serveHTTPUpstream is the tool server behind "axgate serve": POST
// /tools/{name}/call with the arguments as the body, answered with
// {"result": …}.
func serveHTTPUpstream(args []string) {
	fs := flag.NewFlagSet("http-upstream", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	fs.Parse(args)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{name}/call", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
			http.Error(w, `{"error":"bad arguments"}`, http.StatusBadRequest)
			return
		}
		var result string
		switch r.PathValue("name") {
		case "read":
			result = readDoc
		case "write":
			result = `{"written":true}`
		case "stat":
			result = `{"size":142}`
		case "peek":
			result = `{"line":"axgate"}`
		case "publish":
			result = `{"published":true}`
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result":`+result+`}`)
	})
	listenAndServe(*addr, mux)
}

// serveProxy is net/http/httputil's ReverseProxy in front of -target:
// forwards every request and answer as it is (event streams flushed as
// they come), checks nothing; copy buffers pooled, upstream connections
// kept. The floor of any hop that reads HTTP.
func serveProxy(args []string) {
	fs := flag.NewFlagSet("proxy", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	target := fs.String("target", "", "upstream base URL")
	fs.Parse(args)
	u, err := url.Parse(*target)
	if err != nil {
		log.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	p.Transport = t
	p.BufferPool = copyBuffers{}
	p.ErrorLog = log.New(io.Discard, "", 0)
	listenAndServe(*addr, p)
}

type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (copyBuffers) Get() []byte  { return copyBufferPool.Get().(*[32 << 10]byte)[:] }
func (copyBuffers) Put(b []byte) { copyBufferPool.Put((*[32 << 10]byte)(b)) }

// serveRelay is the floor of any hop: it copies the bytes of each
// connection to a connection of its own to -target without reading them
// (splice(2) on Linux).
func serveRelay(args []string) {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	target := fs.String("target", "", "upstream host:port")
	fs.Parse(args)
	ln := listen(*addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", *target)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
			io.Copy(c, up)
		}()
	}
}

// serveRedisCounter relays connections to Redis and counts, in the
// commands its clients send, the commands and the round trips (a batch of
// commands written together and answered together: a pipeline is one).
// GET /count on -http answers {"commands":N,"round_trips":N} without
// touching Redis (no MONITOR, no INFO: the Redis is shared with others).
func serveRedisCounter(args []string) {
	fs := flag.NewFlagSet("redis-counter", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	httpAddr := fs.String("http", "127.0.0.1:0", "address of GET /count")
	target := fs.String("target", "127.0.0.1:6379", "Redis host:port")
	fs.Parse(args)
	var commands, trips atomic.Int64
	hl := listen(*httpAddr)
	go http.Serve(hl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"commands":%d,"round_trips":%d}`, commands.Load(), trips.Load())
	}))
	ln := listen(*addr)
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", *target)
			if err != nil {
				return
			}
			defer up.Close()
			go func() {
				// Parse the client's RESP arrays as they pass: a command is
				// *N then N bulk strings; a round trip ends where the
				// client has nothing more buffered after a whole command.
				r := bufio.NewReaderSize(c, 64<<10)
				w := bufio.NewWriterSize(up, 64<<10)
				defer up.(*net.TCPConn).CloseWrite()
				for {
					if err := copyCommand(r, w); err != nil {
						w.Flush()
						return
					}
					commands.Add(1)
					if r.Buffered() == 0 {
						trips.Add(1)
						if w.Flush() != nil {
							return
						}
					}
				}
			}()
			io.Copy(c, up)
		}()
	}
}

// copyCommand copies one RESP command (an array of bulk strings, or an
// inline command line) from r to w.
func copyCommand(r *bufio.Reader, w *bufio.Writer) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	w.Write(line)
	if len(line) == 0 || line[0] != '*' {
		return nil // inline command
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(line[1:])))
	if err != nil {
		return err
	}
	for range n {
		hdr, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		w.Write(hdr)
		if len(hdr) == 0 || hdr[0] != '$' {
			return errors.New("redis-counter: not a bulk string")
		}
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[1:])))
		if err != nil {
			return err
		}
		if size < 0 {
			continue
		}
		if _, err := io.CopyN(w, r, int64(size)+2); err != nil {
			return err
		}
	}
	return nil
}

func listen(addr string) net.Listener {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	return ln
}

// listenAndServe serves h on addr and prints the address it listens on.
func listenAndServe(addr string, h http.Handler) {
	ln := listen(addr)
	fmt.Fprintln(os.Stdout, "listening on", ln.Addr())
	log.Fatal(http.Serve(ln, h))
}
