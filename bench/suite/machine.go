package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Machine is what a run's figures depend on besides herald: the hardware, the software
// versions and the code measured. A fact that cannot be read says why instead.
type Machine struct {
	CPUModel   string `json:"cpuModel"`
	Cores      int    `json:"cores"`
	MemoryMB   int64  `json:"memoryMB"`
	Kernel     string `json:"kernel"`
	Go         string `json:"go"`
	PostgreSQL string `json:"postgresql"`
	Kafka      string `json:"kafka"`
	Redis      string `json:"redis"`
	Commit     string `json:"commit"`
	Dirty      bool   `json:"dirty"` // uncommitted changes in the worktree
}

// sameMachine tells whether two runs' figures can be compared: the same CPU and core count.
func (m Machine) sameMachine(o Machine) bool {
	return m.CPUModel == o.CPUModel && m.Cores == o.Cores
}

// readMachine gathers the facts; root is the repository, env the stack's environment.
func readMachine(ctx context.Context, root string) Machine {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m := Machine{Cores: runtime.NumCPU()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int64
		for _, c := range strings.TrimSuffix(kb, " kB") {
			if c >= '0' && c <= '9' {
				n = n*10 + int64(c-'0')
			}
		}
		m.MemoryMB = n / 1024
	}
	m.Kernel = readTrim("/proc/sys/kernel/osrelease")
	m.Go = command(ctx, root, "go", "env", "GOVERSION")
	m.Commit = command(ctx, root, "git", "rev-parse", "HEAD")
	m.Dirty = command(ctx, root, "git", "status", "--porcelain") != ""
	m.PostgreSQL = postgresVersion(ctx)
	m.Redis = redisVersion(ctx)
	m.Kafka = kafkaVersion(root) + kafkaPriority(root)
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func command(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "unknown (" + name + ": " + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}

func postgresVersion(ctx context.Context) string {
	url := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if url == "" {
		return "unknown (HERALD_TEST_POSTGRES_URL not set)"
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "unknown (PostgreSQL does not answer)"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "unknown (SELECT version() failed)"
	}
	return v
}

func redisVersion(ctx context.Context) string {
	addr := os.Getenv("HERALD_TEST_REDIS_ADDR")
	if addr == "" {
		return "unknown (HERALD_TEST_REDIS_ADDR not set)"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "unknown (Redis does not answer)"
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown (no redis_version in INFO server)"
}

// stackDir is the local stack's folder (deploy/local/stack.sh's).
func stackDir(root string) string {
	if dir := os.Getenv("HERALD_STACK_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(root, ".stack")
}

// kafkaVersion reads the broker's version from the stack's Kafka installation (the name of
// its kafka-server jar), which is what deploy/local/stack.sh runs.
func kafkaVersion(root string) string {
	jars, _ := filepath.Glob(filepath.Join(stackDir(root), "kafka", "libs", "kafka-server-[0-9]*.jar"))
	sort.Strings(jars)
	if len(jars) == 0 {
		return "unknown (no kafka-server jar in the stack)"
	}
	v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka-server-"), ".jar")
	return "Apache Kafka " + v
}

// kafkaPriority says the running broker's scheduling priority, the nice of its autogroup
// (deploy/local/kafka.sh sets it, HERALD_KAFKA_NICE), since on a machine shared by every part
// of the stack it decides how long a produce request waits for the CPU; empty when the
// broker's pid cannot be read or the broker is not scheduled through an autogroup (a process
// in a cgroup's task group reads an empty /proc/PID/autogroup).
func kafkaPriority(root string) string {
	pid := strings.TrimSpace(strings.SplitN(readTrim(filepath.Join(stackDir(root), "kafka", "kafka.pid")), "\n", 2)[0])
	if pid == "" {
		return ""
	}
	f := strings.Fields(readTrim(filepath.Join(procDir, pid, "autogroup"))) // "/autogroup-93934 nice -10"
	if len(f) != 3 || f[1] != "nice" {
		return ""
	}
	return ", broker at nice " + f[2]
}

// procDir is where kafkaPriority reads a process's autogroup; a test points it elsewhere.
var procDir = "/proc"

// loadAvg is /proc/loadavg's 1, 5 and 15 minute averages.
func loadAvg() string {
	f := strings.Fields(readTrim("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
