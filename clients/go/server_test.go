// Test fixtures: a lockstream server process started from this repository, and a TCP proxy
// that can cut, freeze or stop the connections it carries.

package lockstream_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// server is a lockstream process (the embedded store) started from this repository.
type server struct {
	cmd     *exec.Cmd
	address string
}

var listening = regexp.MustCompile(`^lockstream listening on (\S+)$`)

// startServer runs `lockstream serve` for one test, stopped when it ends.
func startServer(tb testing.TB, args ...string) *server {
	tb.Helper()
	s, err := launch(args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	return s
}

// launch runs `lockstream serve` from the repository this module lives in (node and the
// repository's node_modules are needed: `npm ci` at the root), on the embedded store.
func launch(args ...string) (*server, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is needed to run the lockstream server: %w", err)
	}
	cmd := exec.Command(node, append([]string{"--import", "tsx", "src/cli.ts", "serve", "--port", "0", "--log-format", "json"}, args...)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd}
	found := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			var line struct {
				Msg string `json:"msg"`
			}
			if json.Unmarshal(lines.Bytes(), &line) == nil {
				if m := listening.FindStringSubmatch(line.Msg); m != nil {
					found <- m[1]
				}
			}
		}
	}()
	select {
	case s.address = <-found:
		return s, nil
	case <-time.After(60 * time.Second):
		s.kill()
		return nil, fmt.Errorf("the lockstream server did not start within 60s")
	}
}

func (s *server) stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		_ = s.cmd.Wait()
	}
}

func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// proxy forwards TCP connections to a target until cut, which breaks every connection it
// carries, or frozen, which stops every byte both ways with the sockets left open (a network
// partition, as neither end can tell it from a slow peer).
type proxy struct {
	listener net.Listener
	target   string
	mu       sync.Mutex
	conns    []net.Conn
	thawed   chan struct{} // closed while bytes flow; a frozen proxy's pipes wait on it
}

func startProxy(tb testing.TB, target string) *proxy {
	tb.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &proxy{listener: listener, target: target, thawed: make(chan struct{})}
	close(p.thawed)
	go p.serve()
	tb.Cleanup(func() { _ = listener.Close(); p.thaw(); p.cut() })
	return p
}

func (p *proxy) address() string { return p.listener.Addr().String() }

func (p *proxy) serve() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		upstream, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, upstream)
		p.mu.Unlock()
		go func() { p.pipe(upstream, client); _ = upstream.Close() }()
		go func() { p.pipe(client, upstream); _ = client.Close() }()
	}
}

// pipe copies from src to dst, holding each chunk while the proxy is frozen.
func (p *proxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thawed := p.thawed
			p.mu.Unlock()
			<-thawed
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// freeze stops every byte both ways, on the connections carried and on new ones.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// thaw lets the bytes flow again.
func (p *proxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// stop closes the listener, so that new connections are refused, and every connection carried:
// the proxy is gone, as a dead server's endpoint is.
func (p *proxy) stop() {
	_ = p.listener.Close()
	p.cut()
}

// cut closes every connection carried so far; new ones are still accepted.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, conn := range p.conns {
		_ = conn.Close()
	}
	n := len(p.conns) / 2
	p.conns = nil
	return n
}

func (p *proxy) String() string { return fmt.Sprintf("proxy %s -> %s", p.address(), p.target) }
