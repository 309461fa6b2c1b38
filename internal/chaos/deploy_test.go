// Package chaos runs agentbus as its multi-process deployment — a NATS
// server, Postgres, Redis, the api, the relay, every worker and the
// sessions' sidecars, each its own OS process — kills its processes with
// SIGKILL at random moments while sessions stream, restarts them, and then
// checks that nothing was lost or doubled.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentbus/agentbus/internal/localserver"
	"github.com/agentbus/agentbus/sidecar/launcher"
)

// Workers are the `agentbus worker <name>` processes of the deployment, as
// compose.yaml runs them.
var Workers = []string{"commands", "outbox", "acl", "transcript", "sidecar-dispatch", "pool", "delivery",
	"handoff", "consolidate", "notify", "timeouts", "autocontinue", "scheduler", "webhooks", "runtime"}

// Deployment is the running multi-process deployment.
type Deployment struct {
	Dir      string // everything of the deployment lives here
	Bin      string // the agentbus binary
	NATSBin  string // the nats-server binary
	Secret   string // the api's JWT secret
	APIURL   string // http://127.0.0.1:port
	RedisURL string // the runtime's and relay's Redis
	NATSURL  string
	DBURL    string
	// Runners is how many `agentbus runner` processes run the sidecars,
	// as compose runs them; 0 leaves them to the runtime worker's own
	// runner.
	Runners   int
	Log       *slog.Logger
	passwords map[string]string

	mu       sync.Mutex
	stopping bool
	procs    map[string]*proc // by component name
	pg       *localserver.Postgres
	redis    *localserver.Redis
}

// Build builds the agentbus binary from the module at root and nats-server
// from the module's requirements into dir/bin.
func Build(ctx context.Context, root, dir string) (bin, natsBin string, err error) {
	out := filepath.Join(dir, "bin")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", "", err
	}
	bin, natsBin = filepath.Join(out, "agentbus"), filepath.Join(out, "nats-server")
	for _, b := range []struct{ out, pkg string }{{bin, "./cmd/agentbus"}, {natsBin, "github.com/nats-io/nats-server/v2"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w: %s", b.pkg, err, msg)
		}
	}
	return bin, natsBin, nil
}

// proc is one supervised process: restarted whenever it exits, as
// `restart: unless-stopped` does, until the deployment stops.
type proc struct {
	name string
	args []string
	env  []string
	bin  string
	log  *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

func (p *proc) start() error {
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// Its own process group: a kill of the test leaves it to Pdeathsig,
	// and a signal to the test's group does not reach it twice.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() { _ = cmd.Wait(); close(exited) }()
	return nil
}

// supervise restarts the process whenever it exits, until stop.
func (p *proc) supervise(log *slog.Logger) {
	for {
		p.mu.Lock()
		exited, stopped := p.exited, p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		<-exited
		p.mu.Lock()
		stopped = p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		time.Sleep(100 * time.Millisecond)
		if err := p.start(); err != nil {
			log.Error("restart failed", "component", p.name, "err", err)
			time.Sleep(time.Second)
		}
	}
}

// kill sends SIGKILL and waits until the process is gone; the supervisor
// starts it again.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Kill()
	<-exited
}

// stop ends the process for good: SIGTERM, then SIGKILL after a grace.
func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs the whole deployment under d.Dir: servers first, then the
// schema, then the api, the relay and every worker.
func (d *Deployment) Start(ctx context.Context, usersConf string) error {
	d.procs = map[string]*proc{}
	if err := os.MkdirAll(filepath.Join(d.Dir, "log"), 0o755); err != nil {
		return err
	}
	if err := d.startPostgres(ctx); err != nil {
		return err
	}
	if err := d.startRedis(ctx); err != nil {
		return err
	}
	if err := d.startNATS(ctx, usersConf); err != nil {
		return err
	}
	migrate := exec.CommandContext(ctx, d.Bin, "migrate")
	// migrate provisions the streams and consumers as the operator: the
	// components' users may not.
	migrate.Env = []string{"DATABASE_URL=" + d.DBURL, "PATH=" + os.Getenv("PATH"),
		"NATS_URL=" + d.NATSURL, "NATS_USER=operator", "NATS_PASSWORD=" + d.passwords["operator"]}
	if out, err := migrate.CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %w: %s", err, out)
	}

	apiPort, err := freePort()
	if err != nil {
		return err
	}
	d.APIURL = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	if err := d.run("api", []string{"api", "--http", fmt.Sprintf("127.0.0.1:%d", apiPort)}, "api"); err != nil {
		return err
	}
	// Trimming off: each session's Redis stream keeps every raw event the
	// sidecar wrote, for the check.
	if err := d.run("relay", []string{"relay", "--http", "", "--name", "chaos-relay", "--trim-interval", "0"}, "relay"); err != nil {
		return err
	}
	for _, w := range Workers {
		env := d.env(w)
		if w == "runtime" && d.Runners > 0 {
			env = append(env, "AGENTBUS_RUNNER_CAPACITY=0") // it places, the runners run
		}
		if err := d.supervised("worker-"+w, d.Bin, []string{"worker", w, "--http", ""}, env); err != nil {
			return err
		}
	}
	for i := range d.Runners {
		args := []string{"runner", "--name", runnerName(i), "--capacity", "16"}
		if err := d.run(fmt.Sprintf("runner-%d", i), args, "runner"); err != nil {
			return err
		}
	}
	return d.waitReady(ctx)
}

// runnerName is the name of the runner process runner-<i>.
func runnerName(i int) string { return fmt.Sprintf("chaos-runner-%d", i) }

// groupSuffix names the component that is the whole of a runner: its
// process group and its sidecars', each in a process group of its own.
const groupSuffix = "+sidecars"

// env is what every agentbus process is given: its NATS user and the
// deployment's servers.
func (d *Deployment) env(user string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(),
		"DATABASE_URL=" + d.DBURL, "NATS_URL=" + d.NATSURL, "REDIS_URL=" + d.RedisURL,
		"NATS_USER=" + user, "NATS_PASSWORD=" + d.passwords[user],
		"AGENTBUS_JWT_SECRET=" + d.Secret, "AGENTBUS_API_URL=" + d.APIURL,
		"AGENTBUS_DATA_DIR=" + filepath.Join(d.Dir, "data"), "AGENTBUS_WORKSPACE=" + filepath.Join(d.Dir, "workspace"),
		"AGENTBUS_RUNTIME=process", "AGENTBUS_LOG_LEVEL=warn",
	}
}

// run starts a supervised agentbus process.
func (d *Deployment) run(name string, args []string, user string) error {
	return d.supervised(name, d.Bin, args, d.env(user))
}

func (d *Deployment) supervised(name, bin string, args, env []string) error {
	log, err := os.OpenFile(filepath.Join(d.Dir, "log", name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p := &proc{name: name, bin: bin, args: args, env: env, log: log}
	if err := p.start(); err != nil {
		return err
	}
	d.mu.Lock()
	d.procs[name] = p
	d.mu.Unlock()
	go p.supervise(d.Log)
	return nil
}

func (d *Deployment) startPostgres(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(d.Dir, "log", "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// Postgres runs as an unprivileged user, which must reach its directory.
	if err := os.Chmod(d.Dir, 0o755); err != nil {
		return err
	}
	pg, err := localserver.StartPostgres(ctx, localserver.PostgresConfig{
		Dir: filepath.Join(d.Dir, "postgres"), Port: port, Durable: true, Log: log})
	if err != nil {
		return err
	}
	if err := pg.CreateDatabase(ctx, "agentbus"); err != nil {
		pg.Stop()
		return err
	}
	d.pg, d.DBURL = pg, pg.URL("agentbus")
	return nil
}

func (d *Deployment) startRedis(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(d.Dir, "log", "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	r, err := localserver.StartRedis(ctx, localserver.RedisConfig{
		Dir: filepath.Join(d.Dir, "redis"), Port: port, Durable: true, Log: log})
	if err != nil {
		return err
	}
	d.redis, d.RedisURL = r, r.URL()
	return nil
}

// NATSUsers are the users of nats/users.conf the deployment connects as.
var NATSUsers = append([]string{"operator", "api", "relay", "runner"}, Workers...)

// startNATS runs the nats-server binary with JetStream (every write
// synced, as nats/server.conf) and the users of nats/users.conf.
func (d *Deployment) startNATS(ctx context.Context, usersConf string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	dir := filepath.Join(d.Dir, "nats")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	users, err := os.ReadFile(usersConf)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "users.conf"), users, 0o600); err != nil {
		return err
	}
	conf := fmt.Sprintf("server_name: chaos\nlisten: 127.0.0.1:%d\ninclude users.conf\n"+
		"jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", port, filepath.Join(dir, "store"))
	confFile := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	d.passwords = map[string]string{}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, u := range NATSUsers {
		d.passwords[u] = "chaos-" + u
		env = append(env, "NATS_PASSWORD_"+strings.ToUpper(strings.ReplaceAll(u, "-", "_"))+"="+d.passwords[u])
	}
	d.NATSURL = fmt.Sprintf("nats://127.0.0.1:%d", port)
	if err := d.supervised("nats", d.NATSBin, []string{"-c", confFile}, env); err != nil {
		return err
	}
	return waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", port))
}

// Password returns the NATS password of user.
func (d *Deployment) Password(user string) string { return d.passwords[user] }

func waitTCP(ctx context.Context, addr string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitReady waits until the api answers /readyz.
func (d *Deployment) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok := httpOK(cctx, d.APIURL+"/readyz")
		cancel()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the api did not become ready")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Components lists what Kill can kill: every process, "sidecar" for one
// of the sessions' sidecars and, for each runner, runner-<i>+sidecars: the
// runner with all its sidecars at once, as when its host is lost.
func (d *Deployment) Components() []string {
	out := []string{"postgres", "redis", "sidecar"}
	for i := range d.Runners {
		out = append(out, fmt.Sprintf("runner-%d", i)+groupSuffix)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name := range d.procs {
		out = append(out, name)
	}
	return out
}

// Kill kills a component with SIGKILL and has it started again. It
// returns false when there was nothing to kill (no sidecar running).
func (d *Deployment) Kill(ctx context.Context, name string) (bool, error) {
	switch name {
	case "postgres":
		d.pg.Kill()
		pg, err := restartUntil(ctx, func() (*localserver.Postgres, error) { return d.pg.Restart(ctx) })
		if err != nil {
			return true, err
		}
		d.pg = pg
		return true, nil
	case "redis":
		d.redis.Kill()
		r, err := restartUntil(ctx, func() (*localserver.Redis, error) { return d.redis.Restart(ctx) })
		if err != nil {
			return true, err
		}
		d.redis = r
		return true, nil
	case "sidecar":
		return d.killSidecar(ctx)
	}
	if runner, ok := strings.CutSuffix(name, groupSuffix); ok {
		return true, d.killRunnerGroups(ctx, runner)
	}
	d.mu.Lock()
	p := d.procs[name]
	d.mu.Unlock()
	if p == nil {
		return false, fmt.Errorf("no component %q", name)
	}
	p.kill()
	return true, nil
}

// killSidecar kills one of the sidecars running; false when none runs.
func (d *Deployment) killSidecar(ctx context.Context) (bool, error) {
	pids, err := d.SidecarPIDs(ctx)
	if err != nil || len(pids) == 0 {
		return false, err
	}
	var pid int
	for _, p := range pids {
		pid = p
		break
	}
	err = syscall.Kill(pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		// It exited between the runtime's record and the kill: there
		// was nothing to kill.
		return false, nil
	}
	return true, err
}

// killRunnerGroups kills with SIGKILL, at once, the process group of the
// runner process named runner and the process group of each sidecar it
// records: nothing of it is left to stop in order. Its supervisor starts
// the runner again.
func (d *Deployment) killRunnerGroups(ctx context.Context, runner string) error {
	d.mu.Lock()
	p := d.procs[runner]
	d.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no runner %q", runner)
	}
	i, err := strconv.Atoi(strings.TrimPrefix(runner, "runner-"))
	if err != nil {
		return err
	}
	pids, err := d.recordedSidecars(ctx, runnerName(i))
	if err != nil {
		return err
	}
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // started with Setpgid: it leads its group
	for _, pid := range pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // each sidecar leads a session of its own
	}
	<-exited
	return nil
}

func restartUntil[T any](ctx context.Context, start func() (T, error)) (T, error) {
	var last error
	for range 20 {
		v, err := start()
		if err == nil {
			return v, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	var zero T
	return zero, last
}

// SidecarPIDs returns the pid of each running sidecar, by session, from
// the records of the runtime's runner and of the runner processes.
func (d *Deployment) SidecarPIDs(ctx context.Context) (map[string]int, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	out, err := d.recordedSidecars(ctx, host)
	if err != nil {
		return nil, err
	}
	for i := range d.Runners {
		pids, err := d.recordedSidecars(ctx, runnerName(i))
		if err != nil {
			return nil, err
		}
		maps.Copy(out, pids)
	}
	return out, nil
}

// recordedSidecars returns the pid of each sidecar the launcher named
// name records as running, by session.
func (d *Deployment) recordedSidecars(ctx context.Context, name string) (map[string]int, error) {
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(d.RedisURL, "redis://"), "/0")})
	defer rdb.Close()
	recs, err := rdb.HGetAll(ctx, launcher.RecordsKey(name)).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for id, raw := range recs {
		var rec struct {
			PID    int  `json:"pid"`
			Exited bool `json:"exited"`
		}
		if json.Unmarshal([]byte(raw), &rec) == nil && !rec.Exited && rec.PID > 0 {
			out[id] = rec.PID
		}
	}
	return out, nil
}

// Stop stops every process, then the sidecars left, then the servers.
func (d *Deployment) Stop() {
	d.mu.Lock()
	d.stopping = true
	procs := d.procs
	d.mu.Unlock()
	var wg sync.WaitGroup
	for name, p := range procs {
		if name != "nats" {
			wg.Go(p.stop)
		}
	}
	wg.Wait()
	// The sidecars outlive the runtime by design (a new runtime adopts
	// them); here nothing follows, so they go too.
	for _, pid := range processesNaming(d.Dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if p := procs["nats"]; p != nil {
		p.stop()
	}
	if d.redis != nil {
		d.redis.Stop()
	}
	if d.pg != nil {
		d.pg.Stop()
	}
}

// processesNaming returns the pids whose command line holds s.
func processesNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(raw), s) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
