package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// proc is one running CLI process: it writes frames to its standard input
// and routes the frames of its standard output. Control responses go to
// whoever sent the request; control requests to the session's handler;
// everything else, in order, to msgs.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	log    *slog.Logger
	stderr *tail

	wmu sync.Mutex // serialises writes to stdin

	msgs chan *frame   // user, assistant, system and result frames; closed at EOF
	done chan struct{} // closed once the process has exited
	err  error         // how it exited; read after done

	mu      sync.Mutex
	pending map[string]func(*controlResponse)
}

// startProc starts the CLI. onRequest handles the CLI's control requests
// (each in its own goroutine); onCancel withdraws one.
func startProc(bin string, args, env []string, dir string, log *slog.Logger,
	onRequest func(p *proc, f *frame), onCancel func(requestID string)) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	// Its own process group, so the tools it runs end with it; and it dies
	// with the sidecar, also when the sidecar is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{
		cmd: cmd, stdin: stdin, log: log, stderr: &tail{max: 8 << 10},
		msgs: make(chan *frame, 256), done: make(chan struct{}),
		pending: map[string]func(*controlResponse){},
	}
	cmd.Stderr = p.stderr
	// A tool the CLI started may hold its standard error open after it
	// exited; do not wait for it for long.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go p.read(stdout, onRequest, onCancel)
	return p, nil
}

// read routes the CLI's output until it ends, then waits for the process.
func (p *proc) read(stdout io.Reader, onRequest func(*proc, *frame), onCancel func(string)) {
	r := bufio.NewReaderSize(stdout, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			p.route(line, onRequest, onCancel)
		}
		if err != nil {
			break
		}
	}
	close(p.msgs)
	p.err = p.cmd.Wait()
	p.mu.Lock()
	pending := p.pending
	p.pending = map[string]func(*controlResponse){}
	p.mu.Unlock()
	for _, fn := range pending {
		fn(&controlResponse{Subtype: "error", Error: "the claude process exited"})
	}
	close(p.done)
}

func (p *proc) route(line []byte, onRequest func(*proc, *frame), onCancel func(string)) {
	f := &frame{raw: line}
	if err := json.Unmarshal(line, f); err != nil {
		p.log.Warn("claude wrote a line that is not JSON", "line", truncate(string(line), 200))
		return
	}
	switch f.Type {
	case frameControlRequest:
		go onRequest(p, f)
	case frameControlCancel:
		onCancel(f.RequestID)
	case frameControlResponse:
		if f.Response == nil {
			return
		}
		p.mu.Lock()
		fn := p.pending[f.Response.RequestID]
		delete(p.pending, f.Response.RequestID)
		p.mu.Unlock()
		if fn != nil {
			fn(f.Response)
		}
	default:
		p.msgs <- f
	}
}

// send writes one frame.
func (p *proc) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write to claude: %w", err)
	}
	return nil
}

// request sends a control request; onResponse, when set, gets its
// response. It runs on the reading goroutine, in the order of the output,
// so it must not block.
func (p *proc) request(req any, onResponse func(*controlResponse)) error {
	id := uuid.NewString()
	if onResponse != nil {
		p.mu.Lock()
		p.pending[id] = onResponse
		p.mu.Unlock()
	}
	err := p.send(outControlRequest{Type: frameControlRequest, RequestID: id, Request: req})
	if err != nil {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}
	return err
}

// respond answers a control request of the CLI.
func (p *proc) respond(requestID string, response any) error {
	raw, err := json.Marshal(response)
	if err != nil {
		return err
	}
	return p.send(outControlResponse{Type: frameControlResponse, Response: controlResponse{
		Subtype: "success", RequestID: requestID, Response: raw,
	}})
}

// respondError refuses a control request of the CLI.
func (p *proc) respondError(requestID, msg string) error {
	return p.send(outControlResponse{Type: frameControlResponse, Response: controlResponse{
		Subtype: "error", RequestID: requestID, Error: msg,
	}})
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended, with the end of its standard
// error.
func (p *proc) exitError() error {
	<-p.done
	msg := "the claude process exited"
	if p.err != nil {
		msg += ": " + p.err.Error()
	}
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		msg += "; stderr: " + s
	}
	return errors.New(msg)
}

// exitCode returns the process's exit code, 1 when it has none.
func (p *proc) exitCode() int {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	return 1
}

// stop ends the process: end of input first, then SIGTERM and SIGKILL to
// its process group if it does not exit within grace.
func (p *proc) stop(grace time.Duration) {
	p.wmu.Lock()
	_ = p.stdin.Close()
	p.wmu.Unlock()
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		}
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	<-p.done
}

// kill ends the process group at once and waits for it.
func (p *proc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append([]byte(nil), t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
