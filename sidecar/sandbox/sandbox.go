// Package sandbox builds the command that runs one session's sidecar, and
// so its agent and every tool and validation command, confined with
// bubblewrap (bwrap) under process and memory limits (util-linux prlimit).
//
// Inside, the host's system is read-only (/usr, /bin, /sbin, /lib*, and
// /etc with every entry that is not world-readable masked); the session's
// working directory is read-write at its own path; the session's own home
// and temporary directories, kept on the host so that they survive a
// restart of the sidecar, are bound at Home and /tmp; a few files, such as
// the agentbus binary and the sidecar's config, are bound read-only.
// Nothing else of the host's files exists inside. The command sees only
// its own processes (a PID namespace), runs as a user without
// capabilities in a user namespace of its own, and may not make another.
// The network is the host's: the agent reaches its model, the agent API
// and its Redis user on loopback.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Home is the home directory of a sandboxed command.
const Home = "/home/agent"

// Tmp is the temporary directory of a sandboxed command.
const Tmp = "/tmp"

// Defaults of Config.
const (
	DefaultMaxProcesses = 512
	DefaultMaxMemory    = 4 << 30
)

// Config configures a Sandbox.
type Config struct {
	// Bwrap is the bubblewrap executable. Default: bwrap in PATH.
	Bwrap string
	// Prlimit is util-linux's prlimit executable. Default: prlimit in PATH.
	Prlimit string
	// MaxProcesses caps the processes of one sandbox (RLIMIT_NPROC, which
	// the kernel counts per user namespace). The kernel exempts processes
	// whose user is root outside the namespace: the cap binds only when
	// agentbus runs as a user other than root. Default DefaultMaxProcesses.
	MaxProcesses int
	// MaxMemory caps each process's data segment in bytes (RLIMIT_DATA:
	// heap and private writable mappings, which bounds node and bun, where
	// RLIMIT_AS does not). Default DefaultMaxMemory.
	MaxMemory int64
	// Etc is the system configuration directory made visible. Default /etc.
	Etc string
}

func (c *Config) setDefaults() {
	if c.MaxProcesses <= 0 {
		c.MaxProcesses = DefaultMaxProcesses
	}
	if c.MaxMemory <= 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	if c.Etc == "" {
		c.Etc = "/etc"
	}
}

// Sandbox builds sandboxed commands. It is safe for concurrent use.
type Sandbox struct {
	cfg      Config
	bwrap    string
	prlimit  string
	uid, gid int
	// system holds the arguments that make the read-only system, computed
	// once: the /etc masks depend on the host's files.
	system []string
}

// New finds bwrap and prlimit and computes what of the host's system a
// sandboxed command sees. It does not check that bwrap works here: Check
// does.
func New(cfg Config) (*Sandbox, error) {
	cfg.setDefaults()
	s := &Sandbox{cfg: cfg, uid: os.Getuid(), gid: os.Getgid()}
	if s.uid == 0 {
		// Inside, the user is never root: it holds no capability even in
		// its own namespace's eyes, and tools that refuse root run.
		s.uid, s.gid = 1000, 1000
	}
	var err error
	if s.bwrap, err = lookPath(cfg.Bwrap, "bwrap", "bubblewrap"); err != nil {
		return nil, err
	}
	if s.prlimit, err = lookPath(cfg.Prlimit, "prlimit", "util-linux"); err != nil {
		return nil, err
	}
	if s.prlimit, err = filepath.EvalSymlinks(s.prlimit); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.system = systemArgs(cfg.Etc)
	return s, nil
}

func lookPath(given, name, pkg string) (string, error) {
	if given == "" {
		given = name
	}
	p, err := exec.LookPath(given)
	if err != nil {
		return "", fmt.Errorf("sandbox: %s not found (install the %s package): %w", name, pkg, err)
	}
	return filepath.Abs(p)
}

// Bind is a host file or directory made visible read-only inside.
type Bind struct {
	// Host is the path on the host; symbolic links are followed.
	Host string
	// Inside is where it appears inside.
	Inside string
}

// Spec is what one sandboxed command sees beyond the system.
type Spec struct {
	// Dir is the working directory, read-write at its own path; the
	// command starts there.
	Dir string
	// State is the host directory that keeps the command's home and
	// temporary directories (its home and tmp subdirectories, created if
	// missing) across runs.
	State string
	// ReadOnly are the files or directories bound read-only.
	ReadOnly []Bind
	// ReadWrite are the directories bound read-write besides Dir (the
	// session's checkpoint store).
	ReadWrite []Bind
	// MaxProcesses and MaxMemory override the Sandbox's limits when set.
	MaxProcesses int
	MaxMemory    int64
}

// Env returns the variables that point a sandboxed command at its home
// and temporary directories.
func Env() []string { return []string{"HOME=" + Home, "TMPDIR=" + Tmp} }

// Command returns the command line that runs argv inside the sandbox of
// spec; its first element is the executable. Run it in a session (setsid)
// of its own: no terminal of the host is then reachable. Killing its
// process kills every process inside; its exit status is argv's.
func (s *Sandbox) Command(spec Spec, argv ...string) ([]string, error) {
	if len(argv) == 0 {
		return nil, errors.New("sandbox: no command")
	}
	if !filepath.IsAbs(spec.Dir) || !filepath.IsAbs(spec.State) {
		return nil, fmt.Errorf("sandbox: the working directory %q and state directory %q must be absolute", spec.Dir, spec.State)
	}
	home, tmp := filepath.Join(spec.State, "home"), filepath.Join(spec.State, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	nproc, mem := s.cfg.MaxProcesses, s.cfg.MaxMemory
	if spec.MaxProcesses > 0 {
		nproc = spec.MaxProcesses
	}
	if spec.MaxMemory > 0 {
		mem = spec.MaxMemory
	}
	args := []string{s.bwrap, "--unshare-user", "--uid", strconv.Itoa(s.uid), "--gid", strconv.Itoa(s.gid), "--disable-userns",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
		"--die-with-parent", "--cap-drop", "ALL"}
	args = append(args, s.system...)
	args = append(args, "--proc", "/proc", "--dev", "/dev",
		"--bind", tmp, Tmp, "--bind", home, Home, "--bind", spec.Dir, spec.Dir)
	for _, b := range spec.ReadOnly {
		host, err := filepath.EvalSymlinks(b.Host)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		args = append(args, "--ro-bind", host, b.Inside)
	}
	for _, b := range spec.ReadWrite {
		host, err := filepath.EvalSymlinks(b.Host)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		args = append(args, "--bind", host, b.Inside)
	}
	if !strings.HasPrefix(s.prlimit, "/usr/") {
		args = append(args, "--ro-bind", s.prlimit, prlimitInside)
	}
	// The limits are set inside, once the user namespace exists: the
	// kernel counts the processes of each user namespace against the
	// limit of its own user, and those of the namespace's parent against
	// the limit its creator had, which stays the operator's.
	args = append(args, "--remount-ro", "/", "--chdir", spec.Dir, "--", s.prlimitInside(),
		fmt.Sprintf("--nproc=%d:%d", nproc, nproc), fmt.Sprintf("--data=%d:%d", mem, mem), "--")
	return append(args, argv...), nil
}

// prlimitInside is where prlimit is bound when it is not under /usr.
const prlimitInside = "/run/agentbus/prlimit"

func (s *Sandbox) prlimitInside() string {
	if strings.HasPrefix(s.prlimit, "/usr/") {
		return s.prlimit
	}
	return prlimitInside
}

// Check runs a trivial command in a sandbox and reports why none can be
// made here (no user namespaces, a container's seccomp profile).
func (s *Sandbox) Check(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "agentbus-sandbox-check-")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	argv, err := s.Command(Spec{Dir: work, State: filepath.Join(dir, "state")}, "/bin/sh", "-c", "exit 0")
	if err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sandbox: bwrap cannot make a sandbox here (%v: %s); it needs unprivileged user namespaces (in a container: seccomp and AppArmor unconfined)",
			err, strings.TrimSpace(string(out)))
	}
	return nil
}

// systemArgs returns the bwrap arguments that make the host's system
// visible read-only: /usr, the top-level links or directories into it, and
// etc with every entry that is not world-readable masked.
func systemArgs(etc string) []string {
	args := []string{"--ro-bind", "/usr", "/usr"}
	for _, top := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		st, err := os.Lstat(top)
		switch {
		case err != nil:
		case st.Mode()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(top); err == nil {
				args = append(args, "--symlink", target, top)
			}
		case st.IsDir():
			args = append(args, "--ro-bind", top, top)
		}
	}
	args = append(args, "--ro-bind", etc, "/etc")
	// The host's resolver configuration is often a link out of /etc.
	if target, err := filepath.EvalSymlinks(filepath.Join(etc, "resolv.conf")); err == nil && !strings.HasPrefix(target, etc+"/") {
		args = append(args, "--ro-bind", target, target)
	}
	return append(args, etcMasks(etc)...)
}

// etcMasks hides what of etc is not world-readable: the user inside maps
// to the operator, who may own it (/etc/shadow when the operator is root).
// A file is covered by /dev/null, a directory by an empty read-only tmpfs.
func etcMasks(etc string) []string {
	var args []string
	_ = filepath.WalkDir(etc, func(path string, d fs.DirEntry, err error) error {
		inside := "/etc" + strings.TrimPrefix(path, etc)
		if err != nil {
			if d != nil && d.IsDir() && path != etc {
				args = append(args, "--tmpfs", inside, "--remount-ro", inside)
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		perm := info.Mode().Perm()
		switch {
		case d.IsDir() && perm&0o005 != 0o005 && path != etc:
			args = append(args, "--tmpfs", inside, "--remount-ro", inside)
			return fs.SkipDir
		case info.Mode().IsRegular() && perm&0o004 == 0:
			args = append(args, "--ro-bind", "/dev/null", inside)
		}
		return nil
	})
	return args
}
