package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/distlock-go/distlock/bench/internal/report"
	"github.com/distlock-go/distlock/internal/launch"
)

// modulesOfInterest are the dependencies whose versions the report names.
var modulesOfInterest = []string{
	"github.com/go-redsync/redsync/v4",
	"github.com/bsm/redislock",
	"github.com/redis/rueidis",
	"github.com/redis/go-redis/v9",
}

func environment(redisBin string) report.Env {
	e := report.Env{
		Date:        time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Command:     commandLine(),
		GoVersion:   runtime.Version(),
		OS:          runtime.GOOS,
		Arch:        runtime.GOARCH,
		NumCPU:      runtime.NumCPU(),
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		CPUModel:    cpuModel(),
		RedisServer: launch.RedisVersion(redisBin),
		Distlock:    distlockRevision(),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, want := range modulesOfInterest {
			for _, d := range bi.Deps {
				if d.Path == want {
					v := d.Version
					if d.Replace != nil {
						v += " => " + d.Replace.Path + " " + d.Replace.Version
					}
					e.Modules = append(e.Modules, report.Module{Path: d.Path, Version: v})
				}
			}
		}
	}
	return e
}

func commandLine() string {
	args := append([]string{"lockbench"}, os.Args[1:]...)
	return strings.Join(args, " ")
}

// cpuModel reads the processor name on Linux and macOS; "unknown" elsewhere.
func cpuModel() string {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	if out, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	return "unknown"
}

// distlockRevision names the commit of the library under test (this
// repository without bench/), with "+changes" when its working tree
// differs from that commit.
func distlockRevision() string {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	dir := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", dir, "log", "-1", "--format=%h (%cs)").Output()
	if err != nil {
		return "unknown (no commit)"
	}
	rev := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--", ".", ":(exclude)bench", ":(exclude)BENCHMARKS.md").Output()
	if err == nil && len(st) > 0 {
		rev += " + uncommitted changes"
	}
	return rev
}
