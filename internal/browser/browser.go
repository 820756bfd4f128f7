// Package browser opens the HTML pages brokertrace writes in a real
// browser, Debian's headless Chromium, for tests: it collects what the
// browser's console says about a page (errors, warnings, uncaught
// exceptions, markup it could not draw) and measures every figure as
// drawn, and takes screenshots. A parser of the HTML sees the markup; only
// a browser sees a figure that renders at zero size, an SVG path it cannot
// parse, or a script that throws.
//
// It speaks the DevTools protocol over a WebSocket (golang.org/x/net),
// so it needs nothing but the chromium binary. Tests only.
package browser

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/websocket"
)

// Program is the browser's command, as Debian's chromium package installs it.
const Program = "chromium"

// Browser is one headless Chromium with one tab, in a profile directory of
// its own that Close removes.
type Browser struct {
	cmd     *exec.Cmd
	dir     string
	ws      *websocket.Conn
	width   int
	height  int
	readErr chan error

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan reply
	console []Message
	loaded  chan struct{}
}

// Options size the browser's viewport in CSS pixels (the screenshot's size).
type Options struct {
	Width, Height int
}

// Message is one entry of the browser console that says something is wrong
// with the page.
type Message struct {
	Source string // "console", "exception", or the Log domain's source ("rendering", "network", …)
	Level  string // "error" or "warning"
	Text   string
	URL    string
	Line   int
}

func (m Message) String() string {
	s := fmt.Sprintf("%s %s: %s", m.Source, m.Level, m.Text)
	if m.URL != "" {
		s += fmt.Sprintf(" (%s:%d)", m.URL, m.Line)
	}
	return s
}

type reply struct {
	Result json.RawMessage
	Error  *struct {
		Code    int
		Message string
	}
}

// Start runs chromium headless with a fresh profile and connects to its
// tab. The caller must Close it.
func Start(ctx context.Context, opt Options) (*Browser, error) {
	if opt.Width == 0 {
		opt.Width, opt.Height = 1200, 1500
	}
	dir, err := os.MkdirTemp("", "brokertrace-chromium-")
	if err != nil {
		return nil, err
	}
	b := &Browser{dir: dir, width: opt.Width, height: opt.Height, pending: map[int64]chan reply{}, readErr: make(chan error, 1)}
	b.cmd = exec.Command(Program, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-component-update",
		"--hide-scrollbars", "--mute-audio", "--force-device-scale-factor=1", "--remote-debugging-port=0",
		"--remote-allow-origins=*", "--user-data-dir="+dir, fmt.Sprintf("--window-size=%d,%d", opt.Width, opt.Height), "about:blank")
	// Its home, temporary and cache directories in the profile too, so
	// that Close leaves nothing behind (crash-report settings, singleton
	// sockets).
	b.cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	// Its own process group: the renderer and helper processes go with it.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr strings.Builder
	b.cmd.Stderr = &limitedWriter{w: &stderr, n: 16 << 10}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s: %w", Program, err)
	}
	if err := b.connect(ctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("%s: %w; its stderr:\n%s", Program, err, stderr.String())
	}
	return b, nil
}

// connect waits for the DevTools port Chromium writes into its profile,
// finds its tab and opens the tab's WebSocket.
func (b *Browser) connect(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var port int
	for port == 0 {
		if data, err := os.ReadFile(filepath.Join(b.dir, "DevToolsActivePort")); err == nil {
			if line, _, ok := strings.Cut(string(data), "\n"); ok {
				port, _ = strconv.Atoi(line)
			}
		}
		if port != 0 {
			break
		}
		select {
		case <-ctx.Done():
			return errors.New("no DevTools port within 20 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	wsURL, err := pageTarget(ctx, port)
	if err != nil {
		return err
	}
	b.ws, err = websocket.Dial(wsURL, "", "http://127.0.0.1/")
	if err != nil {
		return err
	}
	go b.read()
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if err := b.call(ctx, m, nil, nil); err != nil {
			return err
		}
	}
	return b.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": b.width, "height": b.height, "deviceScaleFactor": 1, "mobile": false}, nil)
}

// pageTarget is the WebSocket address of the browser's tab.
func pageTarget(ctx context.Context, port int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/json/list", port), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var targets []struct{ Type, WebSocketDebuggerURL string }
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		return "", fmt.Errorf("DevTools /json/list: %w", err)
	}
	for _, t := range targets {
		if t.Type == "page" && t.WebSocketDebuggerURL != "" {
			return t.WebSocketDebuggerURL, nil
		}
	}
	return "", fmt.Errorf("DevTools lists no page among %d targets", len(targets))
}

// Close ends the browser and every process it started, and removes its
// profile directory. It asks Chromium to quit first, so that it reaps its
// own helper processes, then kills whatever is left of its process group.
func (b *Browser) Close() error {
	if b.ws != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b.call(ctx, "Browser.close", nil, nil) // no reply when it quits first
		cancel()
		b.ws.Close()
	}
	if b.cmd.Process != nil {
		exited := make(chan struct{})
		go func() {
			b.cmd.Wait()
			close(exited)
		}()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	return os.RemoveAll(b.dir)
}

// call sends a DevTools command and waits for its reply; result, if not
// nil, receives the reply's result.
func (b *Browser) call(ctx context.Context, method string, params any, result any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan reply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
	}()
	if params == nil {
		params = struct{}{}
	}
	if err := websocket.JSON.Send(b.ws, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(r.Result, result)
	case err := <-b.readErr:
		b.readErr <- err
		return fmt.Errorf("%s: %w", method, err)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// read dispatches what the browser sends: replies to their callers, the
// console's complaints to the page's list, the load event to Load.
func (b *Browser) read() {
	for {
		var m struct {
			ID     int64
			Method string
			Params json.RawMessage
			reply
		}
		if err := websocket.JSON.Receive(b.ws, &m); err != nil {
			b.readErr <- fmt.Errorf("DevTools connection: %w", err)
			return
		}
		b.mu.Lock()
		switch {
		case m.ID != 0:
			if ch := b.pending[m.ID]; ch != nil {
				ch <- m.reply
			}
		case m.Method == "Page.loadEventFired":
			if b.loaded != nil {
				close(b.loaded)
				b.loaded = nil
			}
		default:
			if msg, ok := consoleMessage(m.Method, m.Params); ok {
				b.console = append(b.console, msg)
			}
		}
		b.mu.Unlock()
	}
}

// consoleMessage turns the DevTools events that report a problem into a
// Message: console.error/warn/assert calls, uncaught exceptions, and the
// browser's own log entries (markup it could not parse, failed loads).
func consoleMessage(method string, params json.RawMessage) (Message, bool) {
	switch method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct {
				Value       any
				Description string
			}
		}
		if json.Unmarshal(params, &p) != nil {
			return Message{}, false
		}
		level := map[string]string{"error": "error", "assert": "error", "warning": "warning"}[p.Type]
		var parts []string
		for _, a := range p.Args {
			parts = append(parts, cmp.Or(a.Description, fmt.Sprint(a.Value)))
		}
		return Message{Source: "console", Level: level, Text: strings.Join(parts, " ")}, level != ""
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct {
				Text       string
				URL        string
				LineNumber int
				Exception  struct{ Description string }
			}
		}
		if json.Unmarshal(params, &p) != nil {
			return Message{}, false
		}
		d := p.ExceptionDetails
		return Message{Source: "exception", Level: "error", Text: strings.TrimSpace(d.Text + " " + d.Exception.Description), URL: d.URL, Line: d.LineNumber + 1}, true
	case "Log.entryAdded":
		var p struct {
			Entry struct {
				Source, Level, Text, URL string
				LineNumber               int
			}
		}
		if json.Unmarshal(params, &p) != nil {
			return Message{}, false
		}
		e := p.Entry
		return Message{Source: e.Source, Level: e.Level, Text: e.Text, URL: e.URL, Line: e.LineNumber}, e.Level == "error" || e.Level == "warning"
	}
	return Message{}, false
}

// limitedWriter keeps the first n bytes written to it: Chromium's stderr,
// shown when it fails to start.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
