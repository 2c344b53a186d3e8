package kubernetes_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/distlock-go/distlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { os.Exit(exampletest.Main(m, "../../cmd/distlock", ".")) }

// cronJob is the part of a batch/v1 CronJob that kubernetes/cronjob.yaml
// uses. Decoding with KnownFields rejects any other field, so a misspelt
// one fails the test instead of being ignored as Kubernetes would warn.
type cronJob struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Schedule                string `yaml:"schedule"`
		TimeZone                string `yaml:"timeZone"`
		ConcurrencyPolicy       string `yaml:"concurrencyPolicy"`
		StartingDeadlineSeconds int    `yaml:"startingDeadlineSeconds"`
		JobTemplate             struct {
			Spec struct {
				BackoffLimit     int `yaml:"backoffLimit"`
				PodFailurePolicy struct {
					Rules []struct {
						Action      string `yaml:"action"`
						OnExitCodes struct {
							ContainerName string `yaml:"containerName"`
							Operator      string `yaml:"operator"`
							Values        []int  `yaml:"values"`
						} `yaml:"onExitCodes"`
					} `yaml:"rules"`
				} `yaml:"podFailurePolicy"`
				Template struct {
					Spec struct {
						RestartPolicy                 string      `yaml:"restartPolicy"`
						TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
						Containers                    []container `yaml:"containers"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"`
	} `yaml:"spec"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Env     []envVar `yaml:"env"`
}

type envVar struct {
	Name      string `yaml:"name"`
	ValueFrom struct {
		SecretKeyRef struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

// TestKubernetesCronJob checks the manifest's structure, then runs its
// distlock command line against a real Redis (with a stand-in for the
// report): it must run the report with a fencing token, and exit with a
// status the manifest's failure policy ends the Job on when another
// instance holds the lock.
func TestKubernetesCronJob(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("cronjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var cj cronJob
	if err := dec.Decode(&cj); err != nil {
		t.Fatalf("cronjob.yaml: %v", err)
	}
	job := cj.Spec.JobTemplate.Spec
	pod := job.Template.Spec
	switch {
	case cj.APIVersion != "batch/v1" || cj.Kind != "CronJob":
		t.Fatalf("apiVersion %q, kind %q; want batch/v1 CronJob", cj.APIVersion, cj.Kind)
	case len(strings.Fields(cj.Spec.Schedule)) != 5:
		t.Fatalf("schedule %q does not have the five fields of a cron schedule", cj.Spec.Schedule)
	case pod.RestartPolicy != "Never":
		t.Fatalf("restartPolicy %q; a podFailurePolicy needs Never", pod.RestartPolicy)
	case len(pod.Containers) != 1:
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if !slices.ContainsFunc(ctr.Env, func(e envVar) bool {
		return e.Name == "DISTLOCK_URL" && e.ValueFrom.SecretKeyRef.Key != ""
	}) {
		t.Fatal("the container gets no DISTLOCK_URL from a Secret")
	}
	failJob := map[int]bool{}
	for _, r := range job.PodFailurePolicy.Rules {
		if r.OnExitCodes.ContainerName != ctr.Name || r.OnExitCodes.Operator != "In" {
			t.Fatalf("failure rule %+v does not match container %q's exit codes", r, ctr.Name)
		}
		for _, v := range r.OnExitCodes.Values {
			failJob[v] = r.Action == "FailJob"
		}
	}

	cmd := ctr.Command
	dash := slices.Index(cmd, "--")
	if len(cmd) < 2 || cmd[0] != "distlock" || cmd[1] != "run" || dash < 0 || dash == len(cmd)-1 {
		t.Fatalf("command %q is not distlock run FLAGS -- CMD", cmd)
	}
	key, grace := "", time.Duration(0)
	for _, f := range cmd[2:dash] {
		name, value, _ := strings.Cut(f, "=")
		switch name {
		case "--key":
			key = value
		case "--grace":
			if grace, err = time.ParseDuration(value); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	if key == "" || grace <= 0 || grace >= time.Duration(pod.TerminationGracePeriodSeconds)*time.Second {
		t.Fatalf("want --key and a --grace shorter than terminationGracePeriodSeconds (%ds), got %q", pod.TerminationGracePeriodSeconds, cmd[2:dash])
	}

	// The manifest's command line, with a shell standing in for the report.
	addr, c := exampletest.StartRedis(t)
	env := []string{"DISTLOCK_URL=redis://" + addr + "/0"}
	args := append(slices.Clone(cmd[1:dash+1]), "sh", "-c", `echo "report ran with token $DISTLOCK_TOKEN"`)
	stdout, _ := exampletest.Run(t, 0, env, "distlock", args...)
	exampletest.WantTokenLines(t, stdout, 0, "report ran with token %d")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held, err := c.Mutex(key).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	p := exampletest.Start(t, env, "distlock", args...)
	p.Wait(t, 75)
	if out, _ := p.Output(); out != "" {
		t.Fatalf("the report ran while another instance held the lock: %q", out)
	}
	if !failJob[75] {
		t.Fatal("exit status 75 (lock held elsewhere) does not end the Job: it would be retried")
	}
}
